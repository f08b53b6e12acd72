// planner train --plan plan.json [--steps N] [--memory-limit SIZE] [--json]
//               [--report report.html] [--trace trace.json] model.json
#include <ostream>

#include "commands.h"
#include "job.h"
#include "remat/io.h"
#include "remat/plan.h"
#include "remat/units.h"
#include "report_files.h"
#include "train_report.h"

namespace remat::cli {
namespace {

const char kUsage[] =
    "planner train --plan plan.json [--steps 20] [--memory-limit 2GB] [--json] "
    "[--runtime-device cpu|cuda] [--report report.html] [--trace trace.json] model.json";

// "embedding, block0..block3, final_norm, head, loss"
std::string ChainSummary(const Profile& p) {
  std::string s;
  for (int i = 0; i < p.num_layers(); ++i) {
    const std::string& name = p.layers[i].name;
    int j = i;
    while (j + 1 < p.num_layers() && p.layers[j + 1].kind == "block" &&
           p.layers[i].kind == "block") {
      ++j;
    }
    s += (s.empty() ? "" : ", ") + name;
    if (j > i) s += ".." + p.layers[j].name;
    i = j;
  }
  return s;
}

// The plan must have been made for this model's chain and shape.
Status CheckPlanMatchesModel(const LoadedPlan& plan, const Job& job, const std::string& plan_path,
                             const std::string& model_path) {
  const Profile& mine = job.profile;
  const Profile& theirs = plan.profile;
  bool same = mine.num_layers() == theirs.num_layers();
  for (int i = 0; same && i < mine.num_layers(); ++i) {
    same = mine.layers[i].name == theirs.layers[i].name;
  }
  const std::string remake = "; make the plan from this model (planner profile " + model_path +
                             " -o profile.json, then planner --budget SIZE -o plan.json "
                             "profile.json)";
  if (!same) {
    return Status::Invalid(
        plan_path + " is for another model: its chain has " + std::to_string(theirs.num_layers()) +
        " layers (" + ChainSummary(theirs) + "), " + model_path + " has " +
        std::to_string(mine.num_layers()) + " (" + ChainSummary(mine) + ")" + remake);
  }
  const ModelConfig& c = job.input.config;
  if ((theirs.micro_batch > 0 && theirs.micro_batch != c.micro_batch) ||
      (theirs.seq_len > 0 && theirs.seq_len != c.seq_len)) {
    return Status::Invalid(
        plan_path + " was made for micro_batch " + std::to_string(theirs.micro_batch) +
        ", seq_len " + std::to_string(theirs.seq_len) + "; " + model_path + " has micro_batch " +
        std::to_string(c.micro_batch) + ", seq_len " + std::to_string(c.seq_len) + remake);
  }
  for (size_t k = 0; k < plan.schedule.ops.size(); ++k) {
    const Op& op = plan.schedule.ops[k];
    if (op.save != SaveMode::kSelective) continue;
    const std::string& name = theirs.layers[op.layer].selective[op.option].name;
    if (name != "attention_core") {
      return Status::Invalid(plan_path + ": schedule[" + std::to_string(k) +
                             "] uses selective "
                             "option '" +
                             name + "'; the runtime implements 'attention_core'");
    }
  }
  return Status::Ok();
}

// The plan file as the reports' PlanSet: its schedule simulated on its
// profile, with that profile's no-checkpointing baseline.
Result<PlanSet> PlanSetOf(const LoadedPlan& plan) {
  PlanSet set;
  REMAT_ASSIGN_OR_RETURN(const Strategy strategy, ParseStrategy(plan.strategy));
  REMAT_ASSIGN_OR_RETURN(set.chosen, MakePlanFromSchedule(plan.profile, strategy, "", plan.schedule,
                                                          plan.budget_bytes));
  PlanOptions none;
  none.strategy = Strategy::kNone;
  REMAT_ASSIGN_OR_RETURN(set.baseline, FindSolver(Strategy::kNone)->Solve(plan.profile, none));
  set.candidates.push_back(set.chosen);
  return set;
}

}  // namespace

int TrainCommand(const std::vector<std::string>& argv, Environment& env) {
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
  Result<Args> args = Args::Parse(argv, flags);
  if (!args.ok()) return ReportError(args.status(), env);
  if (args->Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n" << FormatFlags(flags);
    return kExitOk;
  }
  Result<ReportFileOptions> files = ParseReportFileOptions(*args);
  if (!files.ok()) return ReportError(files.status(), env);
  Result<std::string> path = InputPath(*args, kUsage);
  if (!path.ok()) return ReportError(path.status(), env);
  if (!args->Has("plan")) {
    return ReportError(Status::Invalid("missing --plan; usage: " + std::string(kUsage)), env);
  }
  TrainOptions options;
  Result<int64_t> steps = args->GetInt("steps", 20, 1, 1000000);
  if (!steps.ok()) return ReportError(steps.status(), env);
  options.steps = static_cast<int>(*steps);
  Result<int64_t> seed = args->GetInt("seed", 0, 0, INT64_MAX);
  if (!seed.ok()) return ReportError(seed.status(), env);
  options.seed = static_cast<uint64_t>(*seed);
  Result<std::string> device = RuntimeDevice(*args);
  if (!device.ok()) return ReportError(device.status(), env);
  options.device = *device;
  options.clock = args->Get("clock", "wall");
  if (args->Has("memory-limit")) {
    Result<int64_t> limit = ParseBytes(args->Get("memory-limit"));
    if (!limit.ok()) return ReportError(limit.status().WithPrefix("option --memory-limit"), env);
    options.memory_limit_bytes = *limit;
  }

  Result<Job> job = LoadJob(*path, *args);
  if (!job.ok()) return ReportError(job.status(), env);
  if (!job->context.has_config) {
    return ReportError(Status::Invalid(*path + " is a profile; train builds the model, so it needs "
                                               "the model.json the profile was measured from"),
                       env);
  }
  const std::string plan_path = args->Get("plan");
  Result<std::string> plan_text = ReadTextFile(plan_path);
  if (!plan_text.ok()) return ReportError(plan_text.status(), env);
  TrainComparison c;
  c.plan_path = plan_path;
  c.memory_limit_bytes = options.memory_limit_bytes;
  Result<LoadedPlan> plan = ParsePlanJson(*plan_text, plan_path);
  if (!plan.ok()) return ReportError(plan.status(), env);
  c.plan = std::move(*plan);
  const Status matches = CheckPlanMatchesModel(c.plan, *job, plan_path, *path);
  if (!matches.ok()) return ReportError(matches, env);
  Result<PlanSet> plans = PlanSetOf(c.plan);
  if (!plans.ok()) return ReportError(plans.status().WithPrefix(plan_path), env);
  c.predicted = plans->chosen.predicted;
  Result<Runtime*> runtime = GetRuntime(env, "train");
  if (!runtime.ok()) return ReportError(runtime.status(), env);

  const bool json = args->Has("json");
  ProgressBar progress(*env.err, WithQuiet(env.progress, *args));
  options.progress = files->progress = progress.Callback();
  if (!json) {
    *env.out << "training " << job->input.config.name << " with " << plan_path << " ("
             << c.plan.strategy << "), " << options.steps << " steps on " << options.device << "\n";
    options.on_step = [&env, &progress](const StepRecord& s) {
      progress.Clear();  // a bar on the same terminal
      *env.out << FormatStepLine(s) << std::flush;
    };
  }
  Result<TrainResult> measured = (*runtime)->Train(job->input.config, c.plan.schedule, options);
  progress.Finish();
  if (!measured.ok()) return ReportError(measured.status(), env);
  c.measured = std::move(*measured);
  *env.out << (json ? TrainReportJson(c) : FormatTrainText(c));
  std::vector<std::string> with_command = {"train"};
  with_command.insert(with_command.end(), argv.begin(), argv.end());
  const Status written = WriteReportFiles(*files, *plans, c.plan.profile, job->context, &c.measured,
                                          CommandLine(with_command));
  if (!written.ok()) return ReportError(written, env);
  return kExitOk;
}

}  // namespace remat::cli
