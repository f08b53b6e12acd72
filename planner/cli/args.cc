#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace remat::cli {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Dashed(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }

}  // namespace

Result<Args> Args::Parse(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs) {
  Args args;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      args.positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name = a.substr(a[1] == '-' ? 2 : 1);
    std::string value;
    bool has_inline = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      std::string best;
      size_t best_d = 3;
      for (const FlagSpec& s : specs) {
        const size_t d = EditDistance(name, s.name);
        if (d < best_d) {
          best_d = d;
          best = s.name;
        }
      }
      return Status::Invalid("unknown option '" + a + "'" +
                             (best.empty() ? "" : " (did you mean " + Dashed(best) + "?)") +
                             "; see --help");
    }
    if (spec->value_name.empty()) {
      if (has_inline) return Status::Invalid("option " + Dashed(name) + " takes no value");
      value = "1";
    } else if (!has_inline) {
      if (i + 1 >= argv.size()) {
        return Status::Invalid("option " + Dashed(name) + " needs a value (" + spec->value_name +
                               ")");
      }
      value = argv[++i];
    }
    if (args.values_.count(name))
      return Status::Invalid("option " + Dashed(name) + " is given twice");
    args.values_[name] = value;
  }
  return args;
}

std::string Args::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Result<int64_t> Args::GetInt(const std::string& name, int64_t fallback, int64_t min,
                             int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || x < min || x > max) {
    return Status::Invalid("option " + Dashed(name) + ": expected an integer in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "], got '" + v + "'");
  }
  return static_cast<int64_t>(x);
}

Result<double> Args::GetDouble(const std::string& name, double fallback, double min,
                               double max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& v = it->second;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < min || x > max) {
    return Status::Invalid("option " + Dashed(name) + ": expected a number in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "], got '" + v + "'");
  }
  return x;
}

Result<std::vector<int>> Args::GetIntList(const std::string& name) const {
  std::vector<int> out;
  auto it = values_.find(name);
  if (it == values_.end()) return out;
  const std::string& v = it->second;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    if (comma == std::string::npos) comma = v.size();
    const std::string item = v.substr(pos, comma - pos);
    char* end = nullptr;
    errno = 0;
    const long x = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || x < 0 || x > (1 << 20)) {
      return Status::Invalid(
          "option " + Dashed(name) +
          ": expected a comma-separated list of block indices like 0,4,8, got '" + v + "'");
    }
    out.push_back(static_cast<int>(x));
    pos = comma + 1;
  }
  return out;
}

std::string FormatFlags(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const FlagSpec& s : specs) {
    std::string left = "  " + Dashed(s.name) + (s.value_name.empty() ? "" : " " + s.value_name);
    if (left.size() < 26)
      left += std::string(26 - left.size(), ' ');
    else
      left += "  ";
    out += left + s.help + "\n";
  }
  return out;
}

}  // namespace remat::cli
