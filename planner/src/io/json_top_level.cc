#include "remat/io/json_top_level.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"

namespace remat {
namespace {

// nlohmann's SAX events, keeping only the root object's keys and string
// members; nothing below the root is stored.
class TopLevelHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TopLevelHandler(JsonTopLevel* out) : out_(out) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& value) override {
    if (depth_ == 1 && root_object_) out_->strings.emplace_back(out_->keys.back(), value);
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (depth_ == 0) root_object_ = true;
    ++depth_;
    return true;
  }
  bool key(string_t& value) override {
    if (depth_ != 1) return true;
    std::vector<std::string>& keys = out_->keys;
    keys.erase(std::remove(keys.begin(), keys.end(), value), keys.end());
    auto& strings = out_->strings;
    strings.erase(std::remove_if(strings.begin(), strings.end(),
                                 [&](const auto& s) { return s.first == value; }),
                  strings.end());
    keys.push_back(value);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool root_object() const { return root_object_; }

 private:
  JsonTopLevel* out_;
  int depth_ = 0;
  bool root_object_ = false;
};

}  // namespace

bool JsonTopLevel::Has(std::string_view key) const {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

const std::string* JsonTopLevel::String(std::string_view key) const {
  for (const auto& [k, v] : strings) {
    if (k == key) return &v;
  }
  return nullptr;
}

JsonTopLevel ScanJsonTopLevel(std::string_view text) {
  JsonTopLevel out;
  if (internal::JsonTooDeepAt(text) != std::string_view::npos) return out;
  TopLevelHandler handler(&out);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text.begin(), text.end(), &handler);
  } catch (const std::exception&) {
    ok = false;  // nlohmann throws on some errors (a number out of range)
  }
  if (!ok || !handler.root_object()) return JsonTopLevel{};
  out.object = true;
  return out;
}

bool RootHasKeyIfValid(std::string_view text, std::string_view key) {
  auto scanned = [&] { return ScanJsonTopLevel(text).Has(key); };
  constexpr size_t kNone = std::string_view::npos;
  size_t i = text.find_first_not_of(" \t\n\r");
  if (i == kNone || text[i] != '{') return scanned();
  int depth = 0;
  bool at_key = false;  // the next string at depth 1 is a key
  for (; i < text.size(); ++i) {
    switch (text[i]) {
      case '"': {
        const size_t first = i + 1;
        bool escaped = false;
        for (++i; i < text.size() && text[i] != '"'; ++i) {
          if (text[i] == '\\') escaped = true, ++i;
        }
        if (i >= text.size()) return scanned();
        if (depth == 1 && at_key) {
          if (escaped) return scanned();
          if (text.substr(first, i - first) == key) return true;
          at_key = false;
        }
        break;
      }
      case '{':
      case '[':
        at_key = ++depth == 1;
        break;
      case '}':
      case ']':
        if (--depth == 0) return false;
        break;
      case ',':
        at_key = depth == 1;
        break;
      default:
        break;
    }
  }
  return scanned();
}

}  // namespace remat
