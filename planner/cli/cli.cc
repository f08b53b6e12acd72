#include "cli.h"

#include <exception>
#include <new>
#include <ostream>

#include "commands.h"

namespace remat::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidInput:
      return kExitBadInput;
    case StatusCode::kNoFit:
      return kExitNoFit;
    case StatusCode::kOutOfMemory:
      return kExitOom;
    case StatusCode::kInternal:
      return kExitInternal;
    case StatusCode::kOutputFailed:
      return kExitOutputFailed;
  }
  return kExitInternal;
}

Result<Runtime*> GetRuntime(const Environment& env, const std::string& command) {
  if (!env.runtime) {
    return Status::Invalid(command +
                           " needs the LibTorch runtime, and this planner was built "
                           "without it; build with LibTorch (see README, Dependencies)");
  }
  return env.runtime();
}

namespace {

void PrintHelp(Environment& env) {
  *env.out << "remat planner: where to checkpoint a transformer to fit a memory budget, and what "
              "it costs.\n\n"
              "usage: planner [plan] --budget SIZE [options] MODEL.json|config.json|PROFILE.json\n"
              "       planner <command> [options] ...\n\ncommands:\n";
  for (const Command& c : Commands()) {
    std::string name = c.name;
    name.resize(10, ' ');
    *env.out << "  " << name << c.summary << "\n";
  }
  *env.out << "\n'planner <command> --help' shows a command's options. Exit codes: 0 ok, 2 bad "
              "input, 3 no plan fits, 4 out of memory during a run, 5 an output could not be "
              "written.\n";
}

Status Dispatch(const std::vector<std::string>& args, Environment& env) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    PrintHelp(env);
    return Status::Ok();
  }
  if (!args.empty() && args[0] == "--version") {
    *env.out << "remat planner 0.1.0"
             << (env.runtime ? " (LibTorch runtime loaded on first use by train and profile)"
                             : " (built without the LibTorch runtime)")
             << "\nruntime: "
             << (env.runtime_torch_version.empty()
                     ? std::string("not built")
                     : "LibTorch " + env.runtime_torch_version + " (libremat_runtime.so)")
             << "\n";
    return Status::Ok();
  }
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    for (const Command& c : Commands()) {
      if (args[0] == c.name) return c.run({args.begin() + 1, args.end()}, env);
    }
  }
  return PlanCommand(args, env);
}

const char* Prefix(StatusCode code) {
  switch (code) {
    case StatusCode::kInternal:
      return "planner: internal error: ";
    case StatusCode::kNoFit:
      return "planner: ";
    default:
      return "planner: error: ";
  }
}

Status DispatchCatching(const std::vector<std::string>& args, Environment& env) {
  try {
    return Dispatch(args, env);
  } catch (const std::bad_alloc&) {
    return Status::Internal("out of host memory");
  } catch (const std::exception& e) {
    return Status::Internal(e.what());
  } catch (...) {
    return Status::Internal("unknown exception");
  }
}

}  // namespace

int Finish(const Status& status, Environment& env) {
  if (!status.ok()) {
    // What the command printed comes first: standard output is buffered
    // off a terminal, and both may go to one file (2>&1).
    if (env.out != nullptr) env.out->flush();
    *env.err << Prefix(status.code()) << status.message() << "\n";
  }
  return ExitCodeFor(status);
}

int Run(const std::vector<std::string>& args, Environment& env) {
  return Finish(DispatchCatching(args, env), env);
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"plan", "plan checkpoints under a budget (the default command)", PlanCommand},
      {"profile", "print a per-layer profile (--analytic, or measured by the runtime)",
       ProfileCommand},
      {"train", "run training steps with a plan on LibTorch; predicted vs measured", TrainCommand},
      {"pareto", "step time against peak memory for each strategy over a range of budgets",
       ParetoCommand},
  };
  return commands;
}

}  // namespace remat::cli
