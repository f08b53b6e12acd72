#include "torch_errors.h"

#include "cuda_meter_core.h"
#include "remat/io/units.h"

namespace remat::runtime {
namespace {

std::string Bytes(int64_t b) { return FormatBytes(b) + " (" + FormatCount(b) + " bytes)"; }

}  // namespace

std::string FirstLine(const std::string& message) {
  const size_t nl = message.find('\n');
  return nl == std::string::npos ? message : message.substr(0, nl);
}

Status OutOfMemoryStatus(const std::string& where, const std::optional<OomEvent>& event,
                         const MemoryMeter& meter, const std::string& detail) {
  if (event && event->requested_bytes >= 0) {
    return Status::OutOfMemory(
        "out of memory at " + where + ": asked for " + Bytes(event->requested_bytes) + " with " +
        Bytes(event->in_use_bytes) + " in use; the limit is " + Bytes(event->limit_bytes));
  }
  std::string limit;
  if (meter.limit_bytes() > 0) limit = "; the limit is " + Bytes(meter.limit_bytes());
  // CUDA: the caching allocator's message names the request.
  std::string asked;
  if (const std::optional<int64_t> bytes = ParseCudaOomRequestBytes(detail)) {
    asked = ": asked for " + FormatBytes(*bytes);
  }
  return Status::OutOfMemory("out of memory at " + where + asked + " with " +
                             Bytes(meter.current_bytes()) + " in use" + limit + " (" + detail +
                             ")");
}

}  // namespace remat::runtime
