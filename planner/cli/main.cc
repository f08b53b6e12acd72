// planner: thin main. Parses nothing itself; see cli.h.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#ifdef REMAT_HAVE_RUNTIME
#include "remat/runtime/torch_runtime.h"
#endif

int main(int argc, char** argv) {
  remat::cli::Environment env;
  env.out = &std::cout;
  env.err = &std::cerr;
#ifdef REMAT_HAVE_RUNTIME
  std::unique_ptr<remat::Runtime> runtime;
  env.runtime = [&runtime]() -> remat::Result<remat::Runtime*> {
    if (!runtime) runtime = remat::runtime::MakeTorchRuntime();
    return runtime.get();
  };
#endif
  return remat::cli::Run(std::vector<std::string>(argv + 1, argv + argc), env);
}
