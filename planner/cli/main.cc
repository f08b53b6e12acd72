// planner: thin main. Parses nothing itself; see cli.h. The LibTorch runtime
// is a module loaded on first use (runtime_loader.h), so planning never
// loads LibTorch. Standard output goes through a checked stream: a write that
// fails (a full disk, a closed pipe) ends in exit code 5, never in a silently
// lost plan.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "remat/fd_stream.h"
#include "runtime_loader.h"
#include "standard_output.h"

int main(int argc, char** argv) {
  remat::FdStreamBuf stdout_buffer(STDOUT_FILENO, /*flush_each_line=*/::isatty(STDOUT_FILENO));
  std::ostream out(&stdout_buffer);
  remat::cli::Environment env;
  env.out = &out;
  env.err = &std::cerr;
  env.progress = remat::cli::ProgressOptionsFor(STDERR_FILENO);
#ifdef REMAT_HAVE_RUNTIME
  remat::cli::RuntimeLoader runtime(remat::cli::RuntimeModulePath());
  env.runtime = runtime.Source();
#endif
  const int code = remat::cli::Run(std::vector<std::string>(argv + 1, argv + argc), env);
  return remat::cli::FinishStandardOutput(out, stdout_buffer, code, env);
}
