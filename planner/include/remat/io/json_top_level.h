// The top level of a JSON document, read without building its values: for
// the checks that only look at what kind of file an input is (a profile's
// "layers", a graph profile's "chains", a config.json's "model_type") before
// the one full parse of it; a measured profile of a few MB would otherwise
// be parsed once per look.
#ifndef REMAT_IO_JSON_TOP_LEVEL_H_
#define REMAT_IO_JSON_TOP_LEVEL_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

struct JsonTopLevel {
  // Whether the text is a valid JSON document (nested no deeper than the
  // planner's parser accepts) whose root is an object.
  bool object = false;
  // The root's keys in order; a repeated key once, where it last appears
  // (the last member counts, as in a parsed document).
  std::vector<std::string> keys;
  // The root's members whose values are strings.
  std::vector<std::pair<std::string, std::string>> strings;

  bool Has(std::string_view key) const;
  // The root's member `key` where its value is a string, else nullptr.
  const std::string* String(std::string_view key) const;
};

JsonTopLevel ScanJsonTopLevel(std::string_view text);

// Whether the root object of `text` has a member `key`, for a valid JSON
// document exactly what ScanJsonTopLevel(text).Has(key) says; for other
// text either answer. Read by skipping strings and brackets, without
// building or checking values (ScanJsonTopLevel where that cannot tell:
// a root key with escapes, a document cut short): for "is this input of
// that kind?" where an invalid document and one without the key are
// answered alike.
bool RootHasKeyIfValid(std::string_view text, std::string_view key);

}  // namespace remat

#endif  // REMAT_IO_JSON_TOP_LEVEL_H_
