// The subcommands. Each takes the arguments after its name.
#ifndef REMAT_CLI_COMMANDS_H_
#define REMAT_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "args.h"
#include "cli.h"

namespace remat::cli {

struct Command {
  const char* name;
  const char* summary;
  // Renders its output on env.out; returns OK or why not (cli.cc reports it).
  Status (*run)(const std::vector<std::string>& args, Environment& env);
};

// All subcommands, in --help order. `plan` is the default.
const std::vector<Command>& Commands();

Status PlanCommand(const std::vector<std::string>& args, Environment& env);
Status ProfileCommand(const std::vector<std::string>& args, Environment& env);
Status TrainCommand(const std::vector<std::string>& args, Environment& env);
Status ParetoCommand(const std::vector<std::string>& args, Environment& env);
// The plan command on a graph profile (`text`, read from `path`); `flags`
// are the plan command's, of which it takes --budget, --slots, --format
// and -o.
// traced: the graph is a trace of a config.json (traced_input.h), which
// took the job flags the tracer takes (--micro-batch, --seq-len,
// --precision, --device) in.
Status PlanGraphCommand(const Args& args, const std::vector<FlagSpec>& flags,
                        const std::string& path, const std::string& text, Environment& env,
                        bool traced = false);

}  // namespace remat::cli

#endif  // REMAT_CLI_COMMANDS_H_
