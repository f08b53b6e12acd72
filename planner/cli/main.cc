// planner: thin main. Parses nothing itself; see cli.h. The LibTorch runtime
// is a module loaded on first use (runtime_loader.h), so planning never
// loads LibTorch.
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "runtime_loader.h"

int main(int argc, char** argv) {
  remat::cli::Environment env;
  env.out = &std::cout;
  env.err = &std::cerr;
#ifdef REMAT_HAVE_RUNTIME
  remat::cli::RuntimeLoader runtime(remat::cli::RuntimeModulePath());
  env.runtime = runtime.Source();
#endif
  return remat::cli::Run(std::vector<std::string>(argv + 1, argv + argc), env);
}
