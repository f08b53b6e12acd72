// Where LibTorch's exceptions stop: runtime/ calls torch inside
// CatchTorchErrors and hands a Status to its callers.
#ifndef REMAT_RUNTIME_SRC_TORCH_ERRORS_H_
#define REMAT_RUNTIME_SRC_TORCH_ERRORS_H_

#include <c10/util/Exception.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "memory_meter.h"
#include "remat/io/status.h"

namespace remat::runtime {

// "out of memory at <where>: asked for ... with ... in use; limit ..." from
// the meter's record of the refused allocation (or, on CUDA, LibTorch's own
// message `detail`).
Status OutOfMemoryStatus(const std::string& where, const std::optional<OomEvent>& event,
                         const MemoryMeter& meter, const std::string& detail);

// The first line of a LibTorch message, without the C++ backtrace.
std::string FirstLine(const std::string& message);

// Runs `fn` and turns what it throws into a Status prefixed with `where`:
// an allocation refused by the meter's cap or c10::OutOfMemoryError ->
// kOutOfMemory; std::invalid_argument -> kInvalidInput; anything else ->
// kInternal. Nothing escapes.
template <typename F>
Status CatchTorchErrors(const std::string& where, MemoryMeter& meter, F&& fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const c10::Error& e) {
    const std::optional<OomEvent> oom = meter.TakeOom();
    const std::string message = FirstLine(e.what_without_backtrace());
    if (oom || dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) {
      return OutOfMemoryStatus(where, oom, meter, message);
    }
    return Status::Internal(where + ": LibTorch: " + message);
  } catch (const std::invalid_argument& e) {
    return Status::Invalid(where + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(where + ": out of host memory");
  } catch (const std::exception& e) {
    const std::optional<OomEvent> oom = meter.TakeOom();
    if (oom) return OutOfMemoryStatus(where, oom, meter, FirstLine(e.what()));
    return Status::Internal(where + ": " + FirstLine(e.what()));
  }
}

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_TORCH_ERRORS_H_
