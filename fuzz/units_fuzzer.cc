// Strings a user types: byte quantities (--budget), strategy, precision and
// device names, tensor names; and the formatters on arbitrary values.
#include <cmath>
#include <cstring>

#include "fuzz_check.h"
#include "remat/analytic/analytic.h"
#include "remat/io/checked_math.h"
#include "remat/plan/plan.h"
#include "remat/schedule/schedule.h"
#include "remat/io/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  const std::string_view text = fuzz::AsText(data, size);
  Result<int64_t> bytes = ParseBytes(text);
  if (bytes.ok()) {
    REMAT_FUZZ_CHECK(*bytes > 0 && *bytes <= kMaxBytes, std::string(text));
    REMAT_FUZZ_CHECK(!FormatBytes(*bytes).empty(), std::string(text));
  } else {
    fuzz::CheckRejection(bytes.status(), "");
  }
  Result<Strategy> s = ParseStrategy(text);
  if (s.ok()) REMAT_FUZZ_CHECK(ToString(*s) == text, std::string(text));
  Result<Precision> p = ParsePrecision(text);
  if (p.ok()) REMAT_FUZZ_CHECK(ToString(*p) == text, std::string(text));
  Result<DeviceSpec> d = LookupDevice(text);
  if (d.ok()) REMAT_FUZZ_CHECK(d->name == text, std::string(text));
  Result<TensorRef> t = ParseTensorName(text);
  if (t.ok()) REMAT_FUZZ_CHECK(t->index >= 0, std::string(text));
  for (const Status& e : {s.status(), p.status(), d.status(), t.status()}) {
    if (!e.ok()) fuzz::CheckRejection(e, "");
  }
  // The formatters take any value.
  if (size >= sizeof(int64_t)) {
    int64_t v;
    double ms;
    std::memcpy(&v, data, sizeof v);
    std::memcpy(&ms, data, sizeof ms);
    FormatBytes(v);
    FormatCount(v);
    FormatMillis(ms);
  }
  return 0;
}
