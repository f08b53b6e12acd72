// The planner command line as a library: main() only builds an Environment
// and calls Run. Subcommands live in their own files (plan_command.cc, ...).
#ifndef REMAT_CLI_CLI_H_
#define REMAT_CLI_CLI_H_

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "progress_bar.h"
#include "remat/runtime_api.h"

namespace remat::cli {

// Exit codes (README "Exit codes").
enum ExitCode {
  kExitOk = 0,
  kExitInternal = 1,
  kExitBadInput = 2,
  kExitNoFit = 3,
  kExitOom = 4,
  kExitOutputFailed = 5,  // an output file or standard output could not be written
};
int ExitCodeFor(const Status& status);

// Where the runtime comes from. Called only by the commands that run a model
// (train, a measured profile), so that planning never loads LibTorch. Returns
// the runtime (owned by whoever made the source; it outlives the call) or why
// there is none: a build without the runtime, a module that does not load.
using RuntimeSource = std::function<Result<Runtime*>()>;

struct Environment {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  RuntimeSource runtime;  // empty: built without the runtime
  // Progress of long commands on `err` (--quiet turns it off); off by
  // default, main() picks a bar for a terminal and lines otherwise.
  ProgressBarOptions progress;
};

// The runtime of `env` for `command` ("train", "measuring a profile"), or
// kInvalidInput saying this build has none and what to do instead.
Result<Runtime*> GetRuntime(const Environment& env, const std::string& command);

// Runs `planner <args...>` (args without the program name). Never throws.
int Run(const std::vector<std::string>& args, Environment& env);

// Prints "planner: error: <message>" and returns the status's exit code.
int ReportError(const Status& status, Environment& env);

}  // namespace remat::cli

#endif  // REMAT_CLI_CLI_H_
