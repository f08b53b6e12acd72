// Reading JSON objects field by field with messages that name the file, the
// field and the accepted values. Internal to the planner library.
#ifndef REMAT_SRC_JSON_FIELDS_H_
#define REMAT_SRC_JSON_FIELDS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "remat/io/status.h"

namespace remat::internal {

// A document as written to a file: 2-space indent and a final newline. A
// string that is not valid UTF-8 (a Latin-1 file name from the command line)
// gets U+FFFD in place of its bad bytes; nlohmann's default would throw.
inline std::string DumpDocument(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

// Parses JSON text; errors read "<source>: malformed JSON: <where and why>".
// Documents nested deeper than 64 levels are rejected (no remat file comes close).
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& source);

// The byte offset where `text` nests deeper than ParseJson accepts, or npos.
size_t JsonTooDeepAt(std::string_view text);

// A short rendering of a JSON value for messages ("-3", "\"fp8\"", "an array").
std::string DescribeJsonValue(const nlohmann::json& value);

// Reads fields of one JSON object. `where` prefixes messages, e.g.
// "model.json" or "profile.json: layers[3]".
class JsonObjectReader {
 public:
  JsonObjectReader(const nlohmann::json& object, std::string where)
      : object_(object), where_(std::move(where)) {}

  bool Has(const char* key) const { return object_.contains(key); }

  // Each reader leaves *out unchanged when the key is absent and not required.
  Status Int(const char* key, int64_t* out, bool required, int64_t min,
             int64_t max = std::numeric_limits<int64_t>::max()) const;
  Status Double(const char* key, double* out, bool required, double min, double max) const;
  Status String(const char* key, std::string* out, bool required) const;
  Status Bool(const char* key, bool* out, bool required) const;
  // A string that must be one of `accepted`.
  Status Enum(const char* key, std::string* out, const std::vector<std::string>& accepted,
              bool required) const;
  // Fails on a key not in `known`; keys starting with '_' are comments.
  Status NoUnknownKeys(const std::vector<std::string>& known) const;

  Status Error(const char* key, const std::string& what) const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& object_;
  std::string where_;
};

// "a, b or c"
std::string JoinAlternatives(const std::vector<std::string>& items);

}  // namespace remat::internal

#endif  // REMAT_SRC_JSON_FIELDS_H_
