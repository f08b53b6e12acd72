#include "runtime_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "remat/runtime/module_abi.h"

namespace remat::cli {
namespace {

// The directory of the running executable ("" if /proc does not say).
std::string ExecutableDir() {
  std::vector<char> buffer(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0) return "";
  const std::string path(buffer.data(), static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string LastDlError() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown error";
}

const char kWhy[] = "train and a measured profile need the LibTorch runtime module";

}  // namespace

std::string RuntimeModulePath() {
  const char* env = std::getenv("REMAT_RUNTIME_MODULE");
  if (env != nullptr && *env != '\0') return env;
  return ExecutableDir() + "/../lib/" + runtime::kModuleFileName;
}

RuntimeLoader::RuntimeLoader(std::string path) : path_(std::move(path)) {}

// The runtime is deleted; the module stays loaded until the process exits.
RuntimeLoader::~RuntimeLoader() = default;

Result<Runtime*> RuntimeLoader::Get() {
  if (!tried_) {
    tried_ = true;
    status_ = Load();
  }
  if (!status_.ok()) return status_;
  return runtime_.get();
}

Status RuntimeLoader::Load() {
  // RTLD_NOW: a module with unresolved symbols fails here, with dlerror's
  // reason, rather than in the middle of a run. RTLD_LOCAL: LibTorch's
  // symbols stay out of the planner's namespace.
  void* handle = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Status::Invalid(std::string(kWhy) + ", which does not load: " + LastDlError() +
                           " (build the runtime, see README Dependencies, or set "
                           "REMAT_RUNTIME_MODULE to libremat_runtime.so)");
  }
  void* symbol = ::dlsym(handle, runtime::kModuleEntryPoint);
  if (symbol == nullptr) {
    return Status::Invalid(std::string(kWhy) + ": " + path_ + " has no entry point " +
                           runtime::kModuleEntryPoint + " (" + LastDlError() +
                           "); it is not a remat runtime module of this version");
  }
  const auto entry = reinterpret_cast<RematRuntimeEntryPoint>(symbol);
  char error[1024] = "";
  runtime_.reset(entry(runtime::ModuleBuildId().c_str(), error, sizeof(error)));
  if (runtime_ == nullptr) {
    return Status::Invalid(std::string(kWhy) + ": " + path_ + ": " + error);
  }
  return Status::Ok();
}

}  // namespace remat::cli
