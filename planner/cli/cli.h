// The planner command line as a library: main() only builds an Environment
// and calls Run. Subcommands live in their own files (plan_command.cc, ...).
#ifndef REMAT_CLI_CLI_H_
#define REMAT_CLI_CLI_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "remat/runtime_api.h"

namespace remat::cli {

// Exit codes (README "Exit codes").
enum ExitCode { kExitOk = 0, kExitInternal = 1, kExitBadInput = 2, kExitNoFit = 3, kExitOom = 4 };
int ExitCodeFor(const Status& status);

struct Environment {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  Runtime* runtime = nullptr;  // null when built without LibTorch
};

// Runs `planner <args...>` (args without the program name). Never throws.
int Run(const std::vector<std::string>& args, Environment& env);

// Prints "planner: error: <message>" and returns the status's exit code.
int ReportError(const Status& status, Environment& env);

}  // namespace remat::cli

#endif  // REMAT_CLI_CLI_H_
