// planner train --plan plan.json [--steps N] [--memory-limit SIZE] [--json]
//               [--report report.html] [--trace trace.json] model.json
#include <cstdlib>
#include <ostream>

#include "commands.h"
#include "host_link_flags.h"
#include "job.h"
#include "progress_bar.h"
#include "remat/io/io.h"
#include "remat/report/report.h"
#include "remat/report/train_report.h"
#include "remat/planning/training.h"
#include "remat/io/units.h"
#include "report_files.h"

namespace remat::cli {
namespace {

const char kUsage[] =
    "planner train --plan plan.json [--steps 20] [--memory-limit 2GB] [--json] "
    "[--runtime-device cpu|cuda] [--report report.html] [--trace trace.json] model.json";

std::vector<FlagSpec> TrainFlags() {
  std::vector<FlagSpec> flags = {
      {"plan", "FILE", "the plan to run (planner --json / -o output), required"},
      {"steps", "N", "training steps, default 20"},
      {"memory-limit", "SIZE", "fail like a GPU out-of-memory past SIZE bytes in use (exit 4)"},
      {"json", "", "print the report as JSON"},
      {"runtime-device", "DEV", "cpu (default), cuda or cuda:N"},
      {"seed", "N", "seed of the weights, batches and dropout, default 0"},
      {"clock", "C", "wall (default) or thread (CPU time of the thread, as planner profile)"},
      QuietFlag(),
      {"help", "", "show this help"},
  };
  for (const FlagSpec& r : ReportFileFlags()) flags.push_back(r);
  for (const FlagSpec& j : JobFlags()) flags.push_back(j);
  return flags;
}

Result<TrainOptions> ParseTrainOptions(const Args& args) {
  TrainOptions o;
  REMAT_ASSIGN_OR_RETURN(const int64_t steps, args.GetInt("steps", 20, 1, 1000000));
  o.steps = static_cast<int>(steps);
  REMAT_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 0, 0, INT64_MAX));
  o.seed = static_cast<uint64_t>(seed);
  REMAT_ASSIGN_OR_RETURN(o.device, RuntimeDevice(args));
  o.clock = args.Get("clock", "wall");
  if (args.Has("memory-limit")) {
    Result<int64_t> limit = ParseBytes(args.Get("memory-limit"));
    if (!limit.ok()) return limit.status().WithPrefix("option --memory-limit");
    o.memory_limit_bytes = *limit;
  }
  return o;
}

// The plan file named by --plan, read and parsed.
Result<TrainRequest> ReadRequest(const Args& args) {
  if (!args.Has("plan")) return Status::Invalid("missing --plan; usage: " + std::string(kUsage));
  TrainRequest request;
  request.plan_path = args.Get("plan");
  REMAT_ASSIGN_OR_RETURN(request.options, ParseTrainOptions(args));
  REMAT_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(request.plan_path));
  REMAT_ASSIGN_OR_RETURN(request.plan, ParsePlanJson(text, request.plan_path));
  return request;
}

// The caching allocator's settings a CUDA run takes from its plan: the
// plan's reserved peak was replayed with the job's alloc_conf (planner
// --alloc-conf), so the run sets PYTORCH_CUDA_ALLOC_CONF to it in this
// process before the runtime loads, where LibTorch reads it. A setting the
// environment holds already (PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF)
// is the user's and is kept; when it differs from the plan's, a note on
// `err` says so. A CPU run, or a plan without one, changes nothing.
void SetPlanAllocConf(const TrainRequest& request, std::ostream& err) {
  if (request.options.device.rfind("cuda", 0) != 0 || !request.plan.job.has_value() ||
      !request.plan.job->alloc_conf.has_value()) {
    return;
  }
  const std::string& planned = *request.plan.job->alloc_conf;
  for (const char* name : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
    const char* set = std::getenv(name);
    if (set == nullptr) continue;
    if (planned != set) {
      err << "planner: note: " << name << "=" << set << " from the environment is used; the plan "
          << request.plan_path << " was made with \"" << planned << "\"\n";
    }
    return;
  }
  setenv("PYTORCH_CUDA_ALLOC_CONF", planned.c_str(), 1);
}

}  // namespace

Status TrainCommand(const std::vector<std::string>& argv, Environment& env) {
  const std::vector<FlagSpec> flags = TrainFlags();
  REMAT_ASSIGN_OR_RETURN(const Args args, Args::Parse(argv, flags));
  if (args.Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n" << FormatFlags(flags);
    return Status::Ok();
  }
  REMAT_ASSIGN_OR_RETURN(const ReportFileOptions files, ParseReportFileOptions(args));
  REMAT_ASSIGN_OR_RETURN(const std::string path, InputPath(args, kUsage));
  REMAT_ASSIGN_OR_RETURN(TrainRequest request, ReadRequest(args));
  if (!files.html_path.empty()) request.sweep_points = files.pareto_points;
  // A plan carries the job it was made for (--global-batch chooses its
  // micro-batch): train runs that one; a shape typed here must agree.
  REMAT_ASSIGN_OR_RETURN(const JobOverrides typed, ParseJobOverrides(args));
  REMAT_ASSIGN_OR_RETURN(PlannerInput input, LoadPlannerInput(path));
  REMAT_ASSIGN_OR_RETURN(Job job, PlansJob(std::move(input), request, typed));
  REMAT_RETURN_IF_ERROR(
      ApplyHostLinkFlags(args, &job.profile, job.parallel().offload != StateOffload::kNone));
  REMAT_RETURN_IF_ERROR(CheckTrainable(job, request));
  SetPlanAllocConf(request, *env.err);
  REMAT_ASSIGN_OR_RETURN(Runtime * runtime, GetRuntime(env, "train"));

  const bool json = args.Has("json");
  ProgressBar progress(*env.err, WithQuiet(env.progress, args));
  request.options.progress = progress.Callback();
  if (!json) {
    *env.out << "training " << job.config().name << " with " << request.plan_path << " ("
             << request.plan.strategy << "), " << request.options.steps << " steps on "
             << request.options.device << "\n";
    request.options.on_step = [&env, &progress](const StepRecord& s) {
      progress.Clear();  // a bar on the same terminal
      *env.out << FormatStepLine(s) << std::flush;
    };
  }
  REMAT_ASSIGN_OR_RETURN(const TrainComparison c, TrainPlan(job, request, *runtime));
  progress.Finish();
  *env.out << (json ? TrainReportJson(c) : FormatTrainText(c));
  std::vector<std::string> with_command = {"train"};
  with_command.insert(with_command.end(), argv.begin(), argv.end());
  return WriteReportFiles(files, c.plans, c.plan.profile, ReportContextOf(job), &c.measured,
                          c.sweep ? &*c.sweep : nullptr, CommandLine(with_command));
}

}  // namespace remat::cli
