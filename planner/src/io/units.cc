#include "remat/io/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "remat/io/checked_math.h"

namespace remat {
namespace {

struct Unit {
  const char* name;
  double factor;
};

constexpr Unit kUnits[] = {
    {"b", 1.0},        {"kb", 1e3},        {"mb", 1e6},
    {"gb", 1e9},       {"tb", 1e12},       {"kib", 1024.0},
    {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
};

const char kAccepted[] =
    "expected a positive number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, "
    "MiB, GiB, TiB (powers of 1024), e.g. 24GB or 80GiB";

// Appends `value` with `decimals` digits after the point, as printf's
// "%.<decimals>f" writes it in the C locale: std::to_chars in fixed
// notation with a precision is specified to give printf's characters
// (the exact value rounded to the nearest, ties to even; "inf", "nan",
// a "-" for negative values, -0 and negative NaN included).
void AppendFixed(double value, int decimals, std::string* out) {
  // 309 integer digits at most for a finite double, a sign, a point and
  // the decimals.
  char buf[330];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, decimals);
  out->append(buf, r.ptr);
}

}  // namespace

Result<int64_t> ParseBytes(std::string_view text) {
  std::string s(text);
  // Trim spaces.
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  s = s.substr(start);
  const std::string quoted = "'" + std::string(text) + "'";
  if (s.empty()) return Status::Invalid("empty byte quantity: " + std::string(kAccepted));

  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.'))
    ++pos;
  const std::string number = s.substr(0, pos);
  std::string unit = s.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front())))
    unit.erase(unit.begin());
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    return Status::Invalid("bad byte quantity " + quoted + ": " + kAccepted);
  }
  if (unit.empty()) {
    return Status::Invalid("byte quantity " + quoted + " has no unit: " + kAccepted);
  }
  std::string lower;
  for (char c : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double factor = 0;
  for (const Unit& u : kUnits) {
    if (lower == u.name) factor = u.factor;
  }
  if (factor == 0) {
    return Status::Invalid("unknown unit '" + unit + "' in " + quoted + ": " + kAccepted);
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(value)) {
    return Status::Invalid("bad byte quantity " + quoted + ": " + kAccepted);
  }
  const double bytes = std::floor(value * factor);
  if (bytes <= 0) return Status::Invalid("byte quantity " + quoted + " must be positive");
  if (bytes > static_cast<double>(kMaxBytes)) {
    return Status::Invalid("byte quantity " + quoted + " is too large (limit 4 EiB)");
  }
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(int64_t bytes) {
  const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const bool negative = bytes < 0;
  double v = std::fabs(static_cast<double>(bytes));
  int unit = 0;
  while (v >= 1024.0 && unit < 6) {
    v /= 1024.0;
    ++unit;
  }
  std::string out = negative ? "-" : "";
  if (unit == 0) {
    out += std::to_string(static_cast<long long>(v));
    out += " B";
  } else {
    AppendFixed(v, 2, &out);
    out += ' ';
    out += names[unit];
  }
  return out;
}

std::string FormatCount(int64_t value) {
  // Negated as unsigned: -INT64_MIN does not fit in int64.
  const uint64_t magnitude =
      value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  std::string digits = std::to_string(magnitude);
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n > 0 && n % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return value < 0 ? "-" + out : out;
}

std::string FormatMillis(double ms) {
  std::string out;
  if (std::fabs(ms) >= 1000.0) {
    AppendFixed(ms / 1000.0, 2, &out);
    out += " s";
  } else if (std::fabs(ms) >= 10.0) {
    AppendFixed(ms, 1, &out);
    out += " ms";
  } else {
    AppendFixed(ms, 3, &out);
    out += " ms";
  }
  return out;
}

}  // namespace remat
