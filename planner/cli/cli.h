// The planner command line as a library: main() only builds an Environment
// and calls Run. Subcommands live in their own files (plan_command.cc, ...).
#ifndef REMAT_CLI_CLI_H_
#define REMAT_CLI_CLI_H_

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "progress_bar.h"
#include "remat/schedule/runtime_api.h"

namespace remat::cli {

// Exit codes (README "Exit codes"). Commands return a Status; Run turns it
// into one line on stderr and one of these, here and nowhere else.
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
  // The LibTorch version the runtime module was built against ("2.11.0"),
  // for --version, which never loads the module; empty: not built.
  std::string runtime_torch_version;
  // Progress of long commands on `err` (--quiet turns it off); off by
  // default, main() picks a bar for a terminal and lines otherwise.
  ProgressBarOptions progress;
};

// The runtime of `env` for `command` ("train", "measuring a profile"), or
// kInvalidInput saying this build has none and what to do instead.
Result<Runtime*> GetRuntime(const Environment& env, const std::string& command);

// Runs `planner <args...>` (args without the program name): the command's
// Status printed as one line on env.err ("planner: error: ..." for bad input,
// "planner: ..." when no plan fits, "planner: internal error: ..."), and its
// exit code returned. Never throws.
int Run(const std::vector<std::string>& args, Environment& env);

// The one place a Status becomes what the user sees: its line on env.err
// (nothing for OK) and the exit code returned. Run ends here; so does main's
// check of standard output after the command.
int Finish(const Status& status, Environment& env);

}  // namespace remat::cli

#endif  // REMAT_CLI_CLI_H_
