// libremat_runtime.so's one export: the entry point of module_abi.h.
#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>

#include "remat/runtime/module_abi.h"
#include "remat/runtime/torch_runtime.h"

namespace {

void WriteError(const std::string& message, char* error, std::size_t error_size) {
  if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", message.c_str());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) remat::Runtime* remat_runtime_abi_v1(
    const char* caller_build_id, char* error, std::size_t error_size) {
  const std::string mine = remat::runtime::ModuleBuildId();
  if (caller_build_id == nullptr || mine != caller_build_id) {
    WriteError("the runtime module was built differently from this planner (module: " + mine +
                   "; planner: " + (caller_build_id ? caller_build_id : "?") +
                   "); rebuild both from one build tree",
               error, error_size);
    return nullptr;
  }
  try {
    return remat::runtime::MakeTorchRuntime().release();
  } catch (const std::exception& e) {
    WriteError(std::string("the runtime module could not start: ") + e.what(), error, error_size);
  } catch (...) {
    WriteError("the runtime module could not start", error, error_size);
  }
  return nullptr;
}

// The entry point has the type the planner casts it to.
static_assert(std::is_same_v<decltype(&remat_runtime_abi_v1), RematRuntimeEntryPoint>);
