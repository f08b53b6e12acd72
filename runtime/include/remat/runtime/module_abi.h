// The runtime as a loadable module: what libremat_runtime.so exports and the
// planner looks up with dlsym. The planner never links LibTorch; `train` and
// a measured `profile` load the module on first use (planner/cli/
// runtime_loader.h), so planning starts in milliseconds.
//
// The boundary passes C++ objects (remat::Runtime and the planner's structs:
// std::string, std::vector, std::function), so both sides must be built by
// the same compiler with the same flags from the same sources: one CMake
// project builds both. The handshake checks what can be checked: the entry
// point's name carries the ABI version, and the caller's build id (this
// header, compiled on its side) must equal the module's.
#ifndef REMAT_RUNTIME_MODULE_ABI_H_
#define REMAT_RUNTIME_MODULE_ABI_H_

#include <cstddef>
#include <string>

#include "remat/schedule/runtime_api.h"

namespace remat::runtime {

// The entry point's name. Bump the number whenever Runtime or the structs it
// passes change incompatibly.
inline constexpr char kModuleEntryPoint[] = "remat_runtime_abi_v1";

// The module's file name, looked up in <executable dir>/../lib/.
inline constexpr char kModuleFileName[] = "libremat_runtime.so";

// What must agree between the planner and the module for C++ objects to
// cross: the project version, the standard library's string ABI, the sizes
// of the structs passed, and whether the code is sanitized. Computed where
// it is compiled, so each side reports its own.
inline std::string ModuleBuildId() {
  std::string id = "remat 0.1.0";
#if defined(_GLIBCXX_USE_CXX11_ABI)
  id += " cxx11abi=" + std::to_string(_GLIBCXX_USE_CXX11_ABI);
#endif
#if defined(__SANITIZE_ADDRESS__)
  id += " asan";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  id += " asan";
#endif
#endif
  id += " sizes " + std::to_string(sizeof(std::string)) + "," +
        std::to_string(sizeof(ModelConfig)) + "," + std::to_string(sizeof(Profile)) + "," +
        std::to_string(sizeof(Schedule)) + "," + std::to_string(sizeof(MeasureOptions)) + "," +
        std::to_string(sizeof(TrainOptions)) + "," + std::to_string(sizeof(TrainResult));
  return id;
}

}  // namespace remat::runtime

extern "C" {

// Makes a runtime. `caller_build_id` is the caller's ModuleBuildId(); when it
// differs from the module's, or making the runtime fails, returns nullptr
// and writes why (one line, NUL-terminated, truncated to error_size) into
// `error`. Otherwise the caller owns the result and deletes it before
// unloading the module. Never throws.
using RematRuntimeEntryPoint = remat::Runtime* (*)(const char* caller_build_id, char* error,
                                                   std::size_t error_size);

}  // extern "C"

#endif  // REMAT_RUNTIME_MODULE_ABI_H_
