// planner: thin main. Parses nothing itself; see cli.h. Standard output goes
// through a checked stream: a write that fails (a full disk, a closed pipe)
// ends in exit code 5, never in a silently lost plan.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "remat/fd_stream.h"
#include "standard_output.h"
#ifdef REMAT_HAVE_RUNTIME
#include "remat/runtime/torch_runtime.h"
#endif

int main(int argc, char** argv) {
  remat::FdStreamBuf stdout_buffer(STDOUT_FILENO, /*flush_each_line=*/::isatty(STDOUT_FILENO));
  std::ostream out(&stdout_buffer);
  remat::cli::Environment env;
  env.out = &out;
  env.err = &std::cerr;
  env.progress = remat::cli::ProgressOptionsFor(STDERR_FILENO);
#ifdef REMAT_HAVE_RUNTIME
  std::unique_ptr<remat::Runtime> runtime;
  env.runtime = [&runtime]() -> remat::Result<remat::Runtime*> {
    if (!runtime) runtime = remat::runtime::MakeTorchRuntime();
    return runtime.get();
  };
#endif
  const int code = remat::cli::Run(std::vector<std::string>(argv + 1, argv + argc), env);
  return remat::cli::FinishStandardOutput(out, stdout_buffer, code, env);
}
