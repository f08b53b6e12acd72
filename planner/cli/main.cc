// planner: thin main. Parses nothing itself; see cli.h. The LibTorch runtime
// is a module loaded on first use (runtime_loader.h), so planning never
// loads LibTorch. Standard output goes through a checked stream: a write that
// fails (a full disk, a closed pipe) ends in exit code 5, never in a silently
// lost plan.
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "remat/io/fd_stream.h"
#include "runtime_loader.h"
#include "standard_output.h"

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // The solvers allocate tables of a few MB per pass and free them before
  // the next: glibc's defaults return that memory to the kernel and fault
  // it in again (half the page faults of a 256-layer plan, ~5 ms of system
  // time). Keep up to 64 MiB of freed memory for reuse, and serve blocks
  // below 32 MiB (the largest mmap threshold glibc adapts to itself) from
  // the heap from the start.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
  remat::FdStreamBuf stdout_buffer(STDOUT_FILENO, /*flush_each_line=*/::isatty(STDOUT_FILENO));
  std::ostream out(&stdout_buffer);
  remat::cli::Environment env;
  env.out = &out;
  env.err = &std::cerr;
  env.progress = remat::cli::ProgressOptionsFor(STDERR_FILENO);
#ifdef REMAT_HAVE_RUNTIME
  remat::cli::RuntimeLoader runtime(remat::cli::RuntimeModulePath());
  env.runtime = runtime.Source();
  env.runtime_torch_version = REMAT_RUNTIME_TORCH_VERSION[0] ? REMAT_RUNTIME_TORCH_VERSION : "?";
#endif
  const int code = remat::cli::Run(std::vector<std::string>(argv + 1, argv + argc), env);
  return remat::cli::FinishStandardOutput(out, stdout_buffer, code, env);
}
