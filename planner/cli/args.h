// Command-line flags: "--name value", "--name=value", boolean "--name", and
// positional arguments. Errors say which flag and what is accepted.
#ifndef REMAT_CLI_ARGS_H_
#define REMAT_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "remat/io/status.h"

namespace remat::cli {

struct FlagSpec {
  std::string name;        // without dashes: "budget"; a one-letter name is also "-o"
  std::string value_name;  // empty: a boolean flag
  std::string help;
};

class Args {
 public:
  static Result<Args> Parse(const std::vector<std::string>& argv,
                            const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // An integer flag in [min, max]; `fallback` when absent.
  Result<int64_t> GetInt(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  Result<double> GetDouble(const std::string& name, double fallback, double min, double max) const;
  // "0,4,8" -> {0, 4, 8}.
  Result<std::vector<int>> GetIntList(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "  --budget SIZE      memory budget ..." lines for --help.
std::string FormatFlags(const std::vector<FlagSpec>& specs);

}  // namespace remat::cli

#endif  // REMAT_CLI_ARGS_H_
