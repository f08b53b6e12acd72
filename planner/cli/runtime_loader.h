// Where the planner's runtime comes from: libremat_runtime.so (runtime/,
// LibTorch), loaded with dlopen the first time a command asks for it, so
// that the planner itself links no LibTorch and starts in milliseconds.
#ifndef REMAT_CLI_RUNTIME_LOADER_H_
#define REMAT_CLI_RUNTIME_LOADER_H_

#include <memory>
#include <string>

#include "cli.h"

namespace remat::cli {

// The module to load: $REMAT_RUNTIME_MODULE if set and not empty, else
// libremat_runtime.so in <directory of the running executable>/../lib/ (the
// layout of the build tree and of an install).
std::string RuntimeModulePath();

// Loads the module at `path` on the first call and keeps it (and the runtime
// it made) for the rest of the process; later calls return the same runtime
// or the same error. A missing module, one that does not load (dlerror), lacks
// the entry point or was built differently: kInvalidInput, one line naming
// the path. The module is never unloaded (LibTorch does not support it).
class RuntimeLoader {
 public:
  explicit RuntimeLoader(std::string path);
  ~RuntimeLoader();
  RuntimeLoader(const RuntimeLoader&) = delete;
  RuntimeLoader& operator=(const RuntimeLoader&) = delete;

  Result<Runtime*> Get();
  // A RuntimeSource calling Get(); the loader must outlive it.
  RuntimeSource Source() {
    return [this] { return Get(); };
  }

 private:
  Status Load();

  std::string path_;
  bool tried_ = false;
  Status status_;
  std::unique_ptr<Runtime> runtime_;
};

}  // namespace remat::cli

#endif  // REMAT_CLI_RUNTIME_LOADER_H_
