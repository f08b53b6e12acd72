// planner profile --analytic INPUT [-o FILE]   (or measured, with the runtime)
#include <ostream>

#include "commands.h"
#include "job.h"
#include "remat/io.h"

namespace remat::cli {
namespace {

const char kUsage[] =
    "planner profile [--analytic] [--runtime-device cpu|cuda] [-o profile.json] model.json";

}  // namespace

int ProfileCommand(const std::vector<std::string>& argv, Environment& env) {
  std::vector<FlagSpec> flags = {
      {"analytic", "", "derive the profile from the cost model (no hardware needed)"},
      {"o", "FILE", "write the profile to FILE (atomically) instead of standard output"},
      {"runtime-device", "DEV", "measured profiles: cpu (default) or cuda"},
      {"repeats", "N", "measured profiles: timed repetitions per layer, default 5"},
      {"statistic", "S", "measured profiles: a layer's time over its repetitions: median "
                         "(default) or min (the fastest; for a shared, noisy machine)"},
      {"clock", "C", "measured profiles: wall (default) or thread (CPU time of the thread: CPU "
                     "runs with OPENBLAS_NUM_THREADS=1 on a busy machine)"},
      QuietFlag(),
      {"help", "", "show this help"},
  };
  for (const FlagSpec& j : JobFlags()) flags.push_back(j);
  Result<Args> args = Args::Parse(argv, flags);
  if (!args.ok()) return ReportError(args.status(), env);
  if (args->Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n" << FormatFlags(flags);
    return kExitOk;
  }
  Result<std::string> path = InputPath(*args, kUsage);
  if (!path.ok()) return ReportError(path.status(), env);
  Result<Job> job = LoadJob(*path, *args);
  if (!job.ok()) return ReportError(job.status(), env);
  Profile profile = job->profile;
  if (!args->Has("analytic") && job->input.kind != PlannerInput::Kind::kProfile) {
    MeasureOptions m;
    Result<std::string> device = RuntimeDevice(*args);
    if (!device.ok()) return ReportError(device.status(), env);
    m.device = *device;
    Result<int64_t> repeats = args->GetInt("repeats", m.repeats, 1, 1000);
    if (!repeats.ok()) return ReportError(repeats.status(), env);
    m.repeats = static_cast<int>(*repeats);
    m.clock = args->Get("clock", "wall");
    m.statistic = args->Get("statistic", "median");
    const Status valid = ValidateMeasureOptions(m);
    if (!valid.ok()) return ReportError(valid.WithPrefix("option --statistic"), env);
    Result<Runtime*> runtime = GetRuntime(env, "measuring a profile (use --analytic without it)");
    if (!runtime.ok()) return ReportError(runtime.status(), env);
    ProgressBar progress(*env.err, WithQuiet(env.progress, *args));
    m.progress = progress.Callback();
    Result<Profile> measured = (*runtime)->Measure(job->input.config, m);
    progress.Finish();
    if (!measured.ok()) return ReportError(measured.status(), env);
    profile = *measured;
  }
  const std::string text = ProfileToJson(profile);
  if (args->Has("o")) {
    const Status s = WriteOutputFile(args->Get("o"), text);
    if (!s.ok()) return ReportError(s, env);
  } else {
    *env.out << text;
  }
  return kExitOk;
}

}  // namespace remat::cli
