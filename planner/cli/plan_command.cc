// planner [plan] --budget SIZE [--strategy S] [--format text|json|md] [-o plan.json]
//                [--report report.html] [--trace trace.json] INPUT
#include <optional>
#include <ostream>

#include "commands.h"
#include "job.h"
#include "remat/io.h"
#include "remat/plan.h"
#include "remat/report.h"
#include "remat/units.h"
#include "report_files.h"

namespace remat::cli {
namespace {

const char kUsage[] =
    "planner --budget 24GB [--strategy auto] [--format text|json|md] [-o plan.json] "
    "[--report report.html] [--trace trace.json] model.json";

std::vector<FlagSpec> PlanFlags() {
  std::vector<FlagSpec> f = {
      {"budget", "SIZE", "device memory budget: 24GB (10^9), 24GiB (2^30), MB/MiB/TB/TiB/B"},
      {"strategy", "NAME",
       "auto (default), none, uniform, segment, selective, manual, optimal, optimal-single"},
      {"every", "K", "uniform: checkpoint every K-th block (default: best fit, or round(sqrt N))"},
      {"segments", "N", "segment: number of equal segments (default: best fit, or round(sqrt N))"},
      {"checkpoint-layers", "LIST", "manual: block indices to checkpoint, e.g. 0,4,8"},
      {"selective-layers", "LIST", "selective: block indices (default: as many as needed)"},
      {"slots", "N", "optimal: memory resolution of the solver"},
      {"format", "F", "what to print: text (default), json (the plan), md (Markdown summary)"},
      {"json", "", "the same as --format json"},
      {"o", "FILE", "write the plan JSON to FILE (written atomically)"},
  };
  for (const FlagSpec& r : ReportFileFlags()) f.push_back(r);
  f.push_back(QuietFlag());
  f.push_back({"help", "", "show this help"});
  for (const FlagSpec& j : JobFlags()) f.push_back(j);
  return f;
}

enum class Format { kText, kJson, kMarkdown };

Result<Format> ParseFormat(const Args& args) {
  const std::string f = args.Get("format", args.Has("json") ? "json" : "text");
  if (args.Has("json") && f != "json") {
    return Status::Invalid("--json is --format json; it contradicts --format " + f);
  }
  if (f == "text") return Format::kText;
  if (f == "json") return Format::kJson;
  if (f == "md" || f == "markdown") {
    if (!kHaveVisualize) return Status::Invalid("--format md needs the visualize library");
    return Format::kMarkdown;
  }
  return Status::Invalid("option --format: expected text, json or md, got '" + f + "'");
}

// What goes to standard output.
Result<std::string> RenderOutput(Format format, const PlanSet& plans, const Job& job,
                                 const std::string& command) {
  switch (format) {
    case Format::kJson: return PlanToJson(plans, job.profile, job.context);
    case Format::kMarkdown:
      return MarkdownSummary(plans, job.profile, job.context, nullptr, command);
    case Format::kText: break;
  }
  return FormatPlanText(plans, job.profile, job.context);
}

Result<PlanOptions> ParseOptions(const Args& args) {
  PlanOptions o;
  if (args.Has("budget")) {
    Result<int64_t> b = ParseBytes(args.Get("budget"));
    if (!b.ok()) return b.status().WithPrefix("option --budget");
    o.budget_bytes = *b;
  }
  if (args.Has("strategy")) {
    REMAT_ASSIGN_OR_RETURN(o.strategy, ParseStrategy(args.Get("strategy")));
  }
  // A strategy's own flag selects it; contradicting --strategy is an error.
  auto implies = [&](const char* flag, Strategy s) -> Status {
    if (!args.Has(flag)) return Status::Ok();
    if (o.strategy != Strategy::kAuto && o.strategy != s) {
      return Status::Invalid(std::string("option --") + flag + " applies to --strategy " +
                             ToString(s) + ", not " + ToString(o.strategy));
    }
    o.strategy = s;
    return Status::Ok();
  };
  REMAT_RETURN_IF_ERROR(implies("every", Strategy::kUniform));
  REMAT_RETURN_IF_ERROR(implies("segments", Strategy::kSegment));
  REMAT_RETURN_IF_ERROR(implies("checkpoint-layers", Strategy::kManual));
  REMAT_RETURN_IF_ERROR(implies("selective-layers", Strategy::kSelective));
  if (o.strategy == Strategy::kManual && !args.Has("checkpoint-layers")) {
    return Status::Invalid("--strategy manual needs --checkpoint-layers, e.g. 0,4,8");
  }
  REMAT_ASSIGN_OR_RETURN(int64_t every, args.GetInt("every", 0, 1, 1 << 20));
  REMAT_ASSIGN_OR_RETURN(int64_t segments, args.GetInt("segments", 0, 1, 1 << 20));
  REMAT_ASSIGN_OR_RETURN(int64_t slots, args.GetInt("slots", 0, 2, 1 << 20));
  o.every = static_cast<int>(every);
  o.segments = static_cast<int>(segments);
  o.slots = static_cast<int>(slots);
  REMAT_ASSIGN_OR_RETURN(o.checkpoint_layers, args.GetIntList("checkpoint-layers"));
  REMAT_ASSIGN_OR_RETURN(o.selective_layers, args.GetIntList("selective-layers"));
  return o;
}

// When nothing fits: the smallest micro-batch that would, keeping the global
// batch with gradient accumulation.
std::string SuggestFit(const Job& job, const PlanSet& plans, const PlanOptions& options) {
  int64_t lowest = plans.chosen.predicted.peak_bytes;
  std::string lowest_by = ToString(plans.chosen.strategy);
  for (const Plan& c : plans.candidates) {
    if (c.predicted.peak_bytes < lowest) {
      lowest = c.predicted.peak_bytes;
      lowest_by = ToString(c.strategy);
    }
  }
  std::string msg = "no plan fits in " + FormatBytes(options.budget_bytes) +
                    ": the smallest peak any strategy reaches is " + FormatBytes(lowest) + " (" +
                    lowest_by + ")";
  const int64_t state = job.profile.static_bytes();
  if (state >= options.budget_bytes) {
    return msg + "; the model state alone (parameters, gradients, optimizer) needs " +
           FormatBytes(state) +
           ": try a 16-bit precision, an optimizer with less state (sgd), or sharding";
  }
  if (!job.context.has_config) {
    return msg + "; a budget of at least " + FormatBytes(lowest) + " would fit";
  }
  const ModelConfig& c = job.context.config;
  const int64_t global = c.micro_batch * c.grad_accumulation;
  PlanOptions auto_options = options;
  auto_options.strategy = Strategy::kAuto;
  // The plan auto picks at micro-batch `mb`, if one fits.
  auto fitting_plan = [&](int64_t mb) -> std::optional<Plan> {
    ModelConfig m = c;
    m.micro_batch = mb;
    Result<Profile> p = AnalyticProfile(m, job.analytic);
    if (!p.ok()) return std::nullopt;
    Result<PlanSet> s = MakePlan(*p, auto_options);
    if (!s.ok() || !s->chosen.fits) return std::nullopt;
    return s->chosen;
  };
  // Every tensor grows with the micro-batch, so whether a plan fits is
  // monotone in it: bisect for the largest micro-batch that fits (walking
  // down one by one from --micro-batch 100000 would plan 100,000 times).
  int64_t lo = 0, hi = c.micro_batch;  // lo fits (0: none does), hi does not
  std::optional<Plan> lo_plan;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::optional<Plan> p = fitting_plan(mid);
    if (p) {
      lo = mid;
      lo_plan = std::move(p);
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    return msg + "; even micro_batch 1 does not fit: shorten seq_len or use flash attention";
  }
  auto fits_text = [](int64_t mb, const Plan& p) {
    return "micro_batch " + std::to_string(mb) + " fits (" + ToString(p.strategy) + ", peak " +
           FormatBytes(p.predicted.peak_bytes) + ")";
  };
  // The largest fitting micro-batch that divides the global batch, so that
  // gradient accumulation keeps it exactly.
  int64_t divisor = lo;
  while (global % divisor != 0) --divisor;
  const std::optional<Plan> divisor_plan = divisor == lo ? lo_plan : fitting_plan(divisor);
  std::string fit_divisor;
  if (divisor_plan) {
    fit_divisor = fits_text(divisor, *divisor_plan) + " with grad_accumulation " +
                  std::to_string(global / divisor) + ", keeping the global batch of " +
                  std::to_string(global);
  }
  if (divisor == lo) return msg + "; " + fit_divisor;
  const std::string fit_any = fits_text(lo, *lo_plan);
  return fit_divisor.empty() ? msg + "; " + fit_any : msg + "; " + fit_any + "; " + fit_divisor;
}

}  // namespace

int PlanCommand(const std::vector<std::string>& argv, Environment& env) {
  const std::vector<FlagSpec> flags = PlanFlags();
  Result<Args> args = Args::Parse(argv, flags);
  if (!args.ok()) return ReportError(args.status(), env);
  if (args->Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n" << FormatFlags(flags);
    return kExitOk;
  }
  Result<std::string> path = InputPath(*args, kUsage);
  if (!path.ok()) return ReportError(path.status(), env);
  Result<PlanOptions> options = ParseOptions(*args);
  if (!options.ok()) return ReportError(options.status(), env);
  Result<Format> format = ParseFormat(*args);
  if (!format.ok()) return ReportError(format.status(), env);
  Result<ReportFileOptions> files = ParseReportFileOptions(*args);
  if (!files.ok()) return ReportError(files.status(), env);
  files->pareto_slots = options->slots;
  Result<Job> job = LoadJob(*path, *args);
  if (!job.ok()) return ReportError(job.status(), env);
  Result<PlanSet> plans = MakePlan(job->profile, *options);
  if (!plans.ok()) return ReportError(plans.status(), env);

  std::string no_fit;
  if (!plans->chosen.fits) {
    no_fit = SuggestFit(*job, *plans, *options);
    job->context.note = "NO PLAN FITS: " + no_fit;
  }
  if (args->Has("o")) {
    const Status s =
        WriteOutputFile(args->Get("o"), PlanToJson(*plans, job->profile, job->context));
    if (!s.ok()) return ReportError(s, env);
  }
  const std::string command = CommandLine(argv);
  ProgressBar progress(*env.err, WithQuiet(env.progress, *args));
  files->progress = progress.Callback();
  const Status written =
      WriteReportFiles(*files, *plans, job->profile, job->context, nullptr, command);
  progress.Finish();
  if (!written.ok()) return ReportError(written, env);
  // With -o the plan JSON goes to the file and the terminal gets the report.
  const Format shown = *format == Format::kJson && args->Has("o") ? Format::kText : *format;
  Result<std::string> out = RenderOutput(shown, *plans, *job, command);
  if (!out.ok()) return ReportError(out.status(), env);
  *env.out << *out;
  if (!no_fit.empty()) {
    *env.err << "planner: " << no_fit << "\n";
    return kExitNoFit;
  }
  return kExitOk;
}

}  // namespace remat::cli
