// planner profile --analytic INPUT [-o FILE]   (or measured, with the runtime)
#include <ostream>

#include "commands.h"
#include "job.h"
#include "progress_bar.h"
#include "remat/io/io.h"

namespace remat::cli {
namespace {

const char kUsage[] =
    "planner profile [--analytic] [--runtime-device cpu|cuda] [-o profile.json] model.json";

std::vector<FlagSpec> ProfileFlags() {
  std::vector<FlagSpec> flags = {
      {"analytic", "", "derive the profile from the cost model (no hardware needed)"},
      {"o", "FILE", "write the profile to FILE (atomically) instead of standard output"},
      {"runtime-device", "DEV", "measured profiles: cpu (default) or cuda"},
      {"repeats", "N", "measured profiles: timed repetitions per layer, default 5"},
      {"statistic", "S",
       "measured profiles: a layer's time over its repetitions: median "
       "(default) or min (the fastest; for a shared, noisy machine)"},
      {"clock", "C",
       "measured profiles: wall (default) or thread (CPU time of the thread: CPU "
       "runs with OPENBLAS_NUM_THREADS=1 on a busy machine)"},
      QuietFlag(),
      {"help", "", "show this help"},
  };
  for (const FlagSpec& j : JobFlags()) flags.push_back(j);
  return flags;
}

Result<MeasureOptions> ParseMeasureOptions(const Args& args) {
  MeasureOptions m;
  REMAT_ASSIGN_OR_RETURN(m.device, RuntimeDevice(args));
  REMAT_ASSIGN_OR_RETURN(const int64_t repeats, args.GetInt("repeats", m.repeats, 1, 1000));
  m.repeats = static_cast<int>(repeats);
  m.clock = args.Get("clock", "wall");
  m.statistic = args.Get("statistic", "median");
  REMAT_RETURN_IF_ERROR(ValidateMeasureOptions(m).WithPrefix("option --statistic"));
  return m;
}

}  // namespace

Status ProfileCommand(const std::vector<std::string>& argv, Environment& env) {
  const std::vector<FlagSpec> flags = ProfileFlags();
  REMAT_ASSIGN_OR_RETURN(const Args args, Args::Parse(argv, flags));
  if (args.Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n" << FormatFlags(flags);
    return Status::Ok();
  }
  REMAT_ASSIGN_OR_RETURN(const std::string path, InputPath(args, kUsage));
  REMAT_ASSIGN_OR_RETURN(MeasureOptions measure, ParseMeasureOptions(args));
  REMAT_ASSIGN_OR_RETURN(const Job job, LoadJobFromArgs(path, args));
  Profile profile = job.profile;
  if (!args.Has("analytic") && job.has_config()) {
    REMAT_ASSIGN_OR_RETURN(Runtime * runtime,
                           GetRuntime(env, "measuring a profile (use --analytic without it)"));
    ProgressBar progress(*env.err, WithQuiet(env.progress, args));
    measure.progress = progress.Callback();
    REMAT_ASSIGN_OR_RETURN(profile, runtime->Measure(job.config(), measure));
  }
  const std::string text = ProfileToJson(profile);
  if (args.Has("o")) return WriteOutputFile(args.Get("o"), text);
  *env.out << text;
  return Status::Ok();
}

}  // namespace remat::cli
