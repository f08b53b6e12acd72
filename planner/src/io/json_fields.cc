#include "io/json_fields.h"

#include <cmath>

namespace remat::internal {
namespace {

// remat's files nest five levels at most (plan -> profile -> layers -> layer
// -> selective). Deeper documents are rejected before parsing, so that no
// recursive walk over a document (dump, copy, comparison) can exhaust the
// stack: a plan.json of 300,000 '[' would crash ParsePlanJson's dump.
constexpr int kMaxJsonDepth = 64;

// The byte offset where nesting first exceeds kMaxJsonDepth, or npos.
size_t TooDeepAt(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

size_t JsonTooDeepAt(std::string_view text) { return TooDeepAt(text); }

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& source) {
  const size_t deep = TooDeepAt(text);
  if (deep != std::string_view::npos) {
    return Status::Invalid(source + ": malformed JSON: nested deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels at byte " +
                           std::to_string(deep) + "; not a remat file");
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    const size_t at = what.find("parse error");
    if (at != std::string::npos) what = what.substr(at);
    return Status::Invalid(source + ": malformed JSON: " + what);
  } catch (const std::exception& e) {
    // e.g. "[json.exception.out_of_range.406] number overflow parsing '1e999'"
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos) {
      what = what.substr(bracket + 2);
    }
    return Status::Invalid(source + ": malformed JSON: " + what);
  }
}

std::string DescribeJsonValue(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    default: {
      std::string s = value.dump();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return s;
    }
  }
}

std::string JoinAlternatives(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += (i + 1 == items.size()) ? " or " : ", ";
    out += items[i];
  }
  return out;
}

Status JsonObjectReader::Error(const char* key, const std::string& what) const {
  return Status::Invalid(where_ + ": field '" + key + "': " + what);
}

Status JsonObjectReader::Int(const char* key, int64_t* out, bool required, int64_t min,
                             int64_t max) const {
  const auto it = object_.find(key);
  if (it == object_.end()) return required ? Error(key, "missing (required)") : Status::Ok();
  const nlohmann::json& v = *it;
  // (Formatted only for an error: a profile reads thousands of fields.)
  auto range = [&] {
    return max == std::numeric_limits<int64_t>::max()
               ? "an integer >= " + std::to_string(min)
               : "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  };
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(key, "expected " + range() + ", got " + DescribeJsonValue(v) + " (too large)");
    }
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) {
      return Error(key, "expected " + range() + ", got " + DescribeJsonValue(v));
    }
    value = static_cast<int64_t>(d);
  } else {
    return Error(key, "expected " + range() + ", got " + DescribeJsonValue(v));
  }
  if (value < min || value > max) {
    return Error(key, "expected " + range() + ", got " + DescribeJsonValue(v));
  }
  *out = value;
  return Status::Ok();
}

Status JsonObjectReader::Double(const char* key, double* out, bool required, double min,
                                double max) const {
  const auto it = object_.find(key);
  if (it == object_.end()) return required ? Error(key, "missing (required)") : Status::Ok();
  const nlohmann::json& v = *it;
  auto expected = [&] {
    char range[96];
    std::snprintf(range, sizeof range, "a number in [%g, %g]", min, max);
    return Error(key, std::string("expected ") + range + ", got " + DescribeJsonValue(v));
  };
  if (!v.is_number()) return expected();
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max) return expected();
  *out = d;
  return Status::Ok();
}

Status JsonObjectReader::String(const char* key, std::string* out, bool required) const {
  if (!object_.contains(key)) {
    return required ? Error(key, "missing (required)") : Status::Ok();
  }
  const nlohmann::json& v = object_.at(key);
  if (!v.is_string()) return Error(key, "expected a string, got " + DescribeJsonValue(v));
  *out = v.get<std::string>();
  return Status::Ok();
}

Status JsonObjectReader::Bool(const char* key, bool* out, bool required) const {
  if (!object_.contains(key)) {
    return required ? Error(key, "missing (required)") : Status::Ok();
  }
  const nlohmann::json& v = object_.at(key);
  if (!v.is_boolean()) return Error(key, "expected true or false, got " + DescribeJsonValue(v));
  *out = v.get<bool>();
  return Status::Ok();
}

Status JsonObjectReader::Enum(const char* key, std::string* out,
                              const std::vector<std::string>& accepted, bool required) const {
  std::string value;
  if (!object_.contains(key)) {
    return required ? Error(key, "missing (required), expected " + JoinAlternatives(accepted))
                    : Status::Ok();
  }
  const nlohmann::json& v = object_.at(key);
  if (!v.is_string()) {
    return Error(key, "expected " + JoinAlternatives(accepted) + ", got " + DescribeJsonValue(v));
  }
  value = v.get<std::string>();
  for (const std::string& a : accepted) {
    if (a == value) {
      *out = value;
      return Status::Ok();
    }
  }
  return Error(key, "unknown value " + DescribeJsonValue(v) + ", expected " +
                        JoinAlternatives(accepted));
}

Status JsonObjectReader::NoUnknownKeys(const std::vector<std::string>& known) const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    const std::string& k = it.key();
    if (!k.empty() && k[0] == '_') continue;
    bool found = false;
    for (const std::string& n : known) found = found || n == k;
    if (!found) {
      return Status::Invalid(where_ + ": unknown field '" + k + "', expected one of " +
                             JoinAlternatives(known));
    }
  }
  return Status::Ok();
}

}  // namespace remat::internal
