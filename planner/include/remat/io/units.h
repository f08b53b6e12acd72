// Byte quantities as people type them ("24GB", "80GiB") and as we print them.
#ifndef REMAT_UNITS_H_
#define REMAT_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "remat/io/status.h"

namespace remat {

// Parses a byte quantity: a positive number followed by a unit.
// Decimal units: B, KB, MB, GB, TB (powers of 1000); binary units: KiB, MiB,
// GiB, TiB (powers of 1024). Units are case-insensitive except that "b" alone
// is accepted as bytes. "24GB" = 24'000'000'000, "24GiB" = 24 * 2^30,
// "1.5GiB" is allowed, the result is rounded down to whole bytes.
// A number with no unit is rejected (ambiguous), as are zero, negative values,
// NaN/inf and values above 2^62 bytes.
Result<int64_t> ParseBytes(std::string_view text);

// "22.35 GiB", "512.0 MiB", "312 B": binary units, 2 decimals above KiB.
std::string FormatBytes(int64_t bytes);

// "2,868,903,936": the exact byte count with thousands separators.
std::string FormatCount(int64_t value);

// "12.3 ms", "1.25 s".
std::string FormatMillis(double ms);

}  // namespace remat

#endif  // REMAT_UNITS_H_
