// Loading the planner's input (model.json, config.json or a profile) with
// the command-line overrides that every subcommand shares.
#ifndef REMAT_CLI_JOB_H_
#define REMAT_CLI_JOB_H_

#include <vector>

#include "args.h"
#include "remat/analytic.h"
#include "remat/input.h"
#include "remat/report.h"

namespace remat::cli {

// --device, --tflops, --micro-batch, --seq-len, --precision.
std::vector<FlagSpec> JobFlags();

struct Job {
  PlannerInput input;
  AnalyticOptions analytic;
  Profile profile;        // analytic for model inputs, as read for profiles
  ReportContext context;
};

// Reads `path`, applies overrides, and builds the profile. Overrides of model
// fields are rejected for profile inputs (their sizes are measured).
Result<Job> LoadJob(const std::string& path, const Args& args);

// The single positional input file, or an error showing the usage.
Result<std::string> InputPath(const Args& args, const std::string& usage);

// --runtime-device: "cpu" (the default), "cuda" or "cuda:N"; anything else is
// refused by name before a model is loaded or a runtime started.
Result<std::string> RuntimeDevice(const Args& args);

}  // namespace remat::cli

#endif  // REMAT_CLI_JOB_H_
