// The flags every subcommand shares for its input: --device, --tflops,
// --micro-batch, --seq-len, --precision, read into the library's
// JobOverrides, and the input file.
#ifndef REMAT_CLI_JOB_H_
#define REMAT_CLI_JOB_H_

#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "remat/planning/job.h"

namespace remat::cli {

std::vector<FlagSpec> JobFlags();

// Reads the job flags; errors name the flag.
Result<JobOverrides> ParseJobOverrides(const Args& args);

// Reads `path` with the job flags applied.
Result<Job> LoadJobFromArgs(const std::string& path, const Args& args);
// The same where the caller has asked TracedProfilePath(path, args) already:
// `traced` is its answer.
Result<Job> LoadJobFromArgs(const std::string& path, const Args& args,
                            const std::optional<std::string>& traced);

// The single positional input file, or an error showing the usage.
Result<std::string> InputPath(const Args& args, const std::string& usage);

// --runtime-device: "cpu" (the default), "cuda" or "cuda:N"; anything else is
// refused by name before a model is loaded or a runtime started.
Result<std::string> RuntimeDevice(const Args& args);

}  // namespace remat::cli

#endif  // REMAT_CLI_JOB_H_
