// The subcommands. Each takes the arguments after its name.
#ifndef REMAT_CLI_COMMANDS_H_
#define REMAT_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "cli.h"

namespace remat::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args, Environment& env);
};

// All subcommands, in --help order. `plan` is the default.
const std::vector<Command>& Commands();

int PlanCommand(const std::vector<std::string>& args, Environment& env);
int ProfileCommand(const std::vector<std::string>& args, Environment& env);
int TrainCommand(const std::vector<std::string>& args, Environment& env);
int ParetoCommand(const std::vector<std::string>& args, Environment& env);

}  // namespace remat::cli

#endif  // REMAT_CLI_COMMANDS_H_
