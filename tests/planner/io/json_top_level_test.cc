// ScanJsonTopLevel against a full parse: the same verdict on whether a text
// is a JSON object, the same root keys and string members, on documents of
// every shape the planner's inputs take and on malformed ones.
#include "remat/io/json_top_level.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"

namespace remat {
namespace {

// What a full parse says of `text`, in the scan's terms.
JsonTopLevel FromParse(const std::string& text) {
  JsonTopLevel out;
  Result<nlohmann::json> doc = internal::ParseJson(text, "t");
  if (!doc.ok() || !doc->is_object()) return out;
  out.object = true;
  for (auto it = doc->begin(); it != doc->end(); ++it) {
    out.keys.push_back(it.key());
    if (it->is_string()) out.strings.emplace_back(it.key(), it->get<std::string>());
  }
  return out;
}

// Keys looked for in every document: its own, ones it nests, and others.
const std::vector<std::string> kKeysLookedFor = {"k0", "k1", "k2", "k3", "k4", "k5", "chains",
                                                 "layers", "model_type", "a", "s", "deep", "n",
                                                 "remat", "seq_len", "name", ""};

void ExpectSameAsParse(const std::string& text) {
  const JsonTopLevel want = FromParse(text);
  // A valid document's root keys, found without a scan.
  if (want.object) {
    for (const std::string& k : kKeysLookedFor) {
      const bool has = std::find(want.keys.begin(), want.keys.end(), k) != want.keys.end();
      EXPECT_EQ(RootHasKeyIfValid(text, k), has) << k << " in " << text;
    }
  }
  const JsonTopLevel got = ScanJsonTopLevel(text);
  ASSERT_EQ(got.object, want.object) << text;
  // A parsed object orders its keys; the scan keeps the document's order.
  std::vector<std::string> got_keys = got.keys, want_keys = want.keys;
  std::sort(got_keys.begin(), got_keys.end());
  std::sort(want_keys.begin(), want_keys.end());
  EXPECT_EQ(got_keys, want_keys) << text;
  for (const std::string& k : want_keys) {
    const std::string* want_string = nullptr;
    for (const auto& [key, value] : want.strings) {
      if (key == k) want_string = &value;
    }
    const std::string* got_string = got.String(k);
    ASSERT_EQ(got_string == nullptr, want_string == nullptr) << k << " in " << text;
    if (got_string != nullptr) {
      EXPECT_EQ(*got_string, *want_string) << k << " in " << text;
    }
    EXPECT_TRUE(got.Has(k));
  }
}

TEST(JsonTopLevel, AgreesWithAFullParseOnInputsOfEveryKind) {
  const std::vector<std::string> texts = {
           R"({"model_type": "llama", "hidden_size": 4096, "remat": {"seq_len": 8192}})",
           R"({"layers": [{"name": "a", "model_type": "x"}], "static_bytes": 0})",
           R"({"chains": [{"name": "enc", "layers": []}], "edges": []})",
           R"({"name": "gpt2", "layers": 12, "dtype": "fp16", "nested": {"model_type": "no"}})",
           R"({"model_type": 3})",
           R"({"model_type": null, "layers": "x"})",
           R"({"a": "first", "a": 2})",   // the last member counts
           R"({"a": 2, "a": "last"})",
           R"({"s": "escaped \" quote \\ and \u00e9"})",
           R"({})",
           R"([1, 2, {"model_type": "llama"}])",
           R"("model_type")",
           R"(42)",
           R"(null)",
           "",
           "not json",
           R"({"model_type": "llama",})",   // trailing comma
           R"({"model_type": "llama"} trailing)",
           R"({"model_type": "llama")",     // unterminated
           R"({"n": 1e999})",                 // out of range
           R"({"deep": )" + std::string(70, '[') + std::string(70, ']') + "}",  // deeper than 64
           R"({"deep": )" + std::string(60, '[') + std::string(60, ']') + "}",
           R"({"ch\u0061ins": 1, "s": "chains"})",      // a key with an escape
           R"({"a\"b": {"chains": [","]}, "s": "x\\", "layers": "{"})",
           R"( {"s": ["chains", {"layers": 1}], "name": "layers"} )",
           R"({"s": "a\"}", "n": 1})",                   // an escaped quote in a value
           "\xEF\xBB\xBF{\"chains\": []}",             // a byte order mark first
  };
  for (const std::string& text : texts) ExpectSameAsParse(text);
}

// A text looked at again answers as at its first look, and another text
// (of the same length, or the same buffer rewritten) answers for itself.
TEST(JsonTopLevel, LooksAgainAtATextAsAtItsFirstLook) {
  const std::string profile = R"({"layers": [], "name": "graph!"})";
  const std::string graph = R"({"chains": [], "name": "chains"})";
  ASSERT_EQ(profile.size(), graph.size());
  for (const std::string* text : {&profile, &profile, &graph, &graph, &profile, &graph}) {
    ExpectSameAsParse(*text);
  }
  std::string buffer = profile;
  ExpectSameAsParse(buffer);
  buffer.replace(buffer.find("layers"), 6, "chains");
  ExpectSameAsParse(buffer);
  EXPECT_TRUE(ScanJsonTopLevel(buffer).Has("chains"));
  buffer.replace(buffer.find('}'), 1, "]");
  ExpectSameAsParse(buffer);
  EXPECT_FALSE(ScanJsonTopLevel(buffer).object);
}

TEST(JsonTopLevel, AgreesWithAFullParseOnRandomDocuments) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::function<nlohmann::json(int)> value = [&](int depth) -> nlohmann::json {
    switch (depth > 3 ? pick(4) : pick(6)) {
      case 0: return pick(1000) - 500;
      case 1: return "s" + std::to_string(pick(5));
      case 2: return pick(2) == 1;
      case 3: return nullptr;
      case 4: {
        nlohmann::json a = nlohmann::json::array();
        for (int i = pick(4); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        nlohmann::json o = nlohmann::json::object();
        for (int i = pick(5); i > 0; --i) o["k" + std::to_string(pick(6))] = value(depth + 1);
        return o;
      }
    }
  };
  for (int i = 0; i < 300; ++i) {
    const std::string text = value(0).dump();
    ExpectSameAsParse(text);
    // The same text cut short is malformed for both.
    if (text.size() > 2) ExpectSameAsParse(text.substr(0, text.size() / 2));
  }
}

}  // namespace
}  // namespace remat
