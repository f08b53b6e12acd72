// planner [plan] --budget SIZE [--strategy S] [--format text|json|md] [-o plan.json]
//                [--export ENGINE] [--report report.html] [--trace trace.json] INPUT
#include <optional>
#include <ostream>

#include "commands.h"
#include "job.h"
#include "progress_bar.h"
#include "remat/report/batch_report.h"
#include "remat/device/device_memory.h"
#include "remat/planning/engine_plan.h"
#include "remat/report/export.h"
#include "remat/io/io.h"
#include "remat/plan/plan_file.h"
#include "remat/planning/planning.h"
#include "remat/report/report.h"
#include "remat/io/units.h"
#include "remat/profile/graph_profile.h"
#include "report_files.h"
#include "traced_input.h"

namespace remat::cli {
namespace {

const char kUsage[] =
    "planner --budget 24GB [--strategy auto] [--format text|json|md] [-o plan.json] "
    "[--report report.html] [--trace trace.json] model.json|config.json|profile.json|graph.json";

// The device's memory besides tensors: --device's preset, then these flags.
std::vector<FlagSpec> DeviceMemoryFlags() {
  return {
      {"cuda-context", "SIZE", "CUDA context, e.g. 600MiB (default: --device preset, else 0)"},
      {"cuda-workspace", "SIZE", "cuBLAS/cuDNN workspaces, e.g. 64MiB (default: as above)"},
      {"fragmentation", "F",
       "a fraction of the rounded peak on top, e.g. 5%, instead of replaying the caching "
       "allocator (default: replay)"},
      {"alloc-conf", "CONF",
       "PYTORCH_CUDA_ALLOC_CONF the allocator replay follows, e.g. "
       "expandable_segments:True,max_split_size_mb:128 (default: PyTorch's defaults)"},
  };
}

Result<DeviceMemoryTerms> ParseDeviceMemory(const Args& args) {
  DeviceMemoryOverrides o;
  auto bytes = [&args](const char* flag, std::optional<int64_t>* out) -> Status {
    if (!args.Has(flag)) return Status::Ok();
    Result<int64_t> b = ParseTermBytes(args.Get(flag));
    if (!b.ok()) return b.status().WithPrefix(std::string("option --") + flag);
    *out = *b;
    return Status::Ok();
  };
  REMAT_RETURN_IF_ERROR(bytes("cuda-context", &o.cuda_context_bytes));
  REMAT_RETURN_IF_ERROR(bytes("cuda-workspace", &o.workspace_bytes));
  if (args.Has("fragmentation")) {
    Result<double> f = ParseFraction(args.Get("fragmentation"));
    if (!f.ok()) return f.status().WithPrefix("option --fragmentation");
    o.fragmentation = *f;
  }
  const std::string conf = args.Get("alloc-conf");
  if (args.Has("alloc-conf")) {
    Result<AllocatorOptions> parsed = ParseAllocConf(conf);
    if (!parsed.ok()) return parsed.status().WithPrefix("option --alloc-conf");
  }
  Result<DeviceMemoryTerms> terms = ResolveDeviceMemory(args.Get("device"), o, conf);
  if (!terms.ok()) return terms.status().WithPrefix("option --device");
  return terms;
}

std::vector<FlagSpec> PlanFlags() {
  std::vector<FlagSpec> f = {
      {"budget", "SIZE", "device memory budget: 24GB (10^9), 24GiB (2^30), MB/MiB/TB/TiB/B"},
      {"strategy", "NAME",
       "auto (default), none, uniform, segment, selective, manual, optimal, optimal-single, "
       "offload (needs --host-link)"},
      {"every", "K", "uniform: checkpoint every K-th block (default: best fit, or round(sqrt N))"},
      {"segments", "N", "segment: number of equal segments (default: best fit, or round(sqrt N))"},
      {"checkpoint-layers", "LIST", "manual: block indices to checkpoint, e.g. 0,4,8"},
      {"selective-layers", "LIST", "selective: block indices (default: as many as needed)"},
      {"slots", "N", "optimal: memory resolution of the solver"},
      {"exact-times", "", "optimal: no pooling of layers within their measured time spread"},
      {"global-batch", "G", "choose micro_batch b and grad_accumulation G/b with the plan"},
      {"format", "F", "what to print: text (default), json (the plan), md (Markdown summary)"},
      {"json", "", "the same as --format json"},
      {"o", "FILE", "write the plan JSON to FILE (written atomically)"},
      {"alloc-trace", "FILE",
       "write the chosen plan's caching-allocator replay, event by event, to FILE "
       "(docs/device-memory.md)"},
      {"export", "ENGINE",
       "print what a training engine takes for the plan instead of the report: pytorch, hf, "
       "deepspeed, megatron, torchtitan (docs/exports.md)"},
      QuietFlag(),
  };
  for (const FlagSpec& r : ReportFileFlags()) f.push_back(r);
  f.push_back({"help", "", "show this help"});
  for (const FlagSpec& j : JobFlags()) f.push_back(j);
  for (const FlagSpec& d : DeviceMemoryFlags()) f.push_back(d);
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

// --export ENGINE, which replaces the report on standard output.
Result<std::optional<Engine>> ParseExport(const Args& args) {
  if (!args.Has("export")) return std::optional<Engine>();
  Result<Engine> e = ParseEngine(args.Get("export"));
  if (!e.ok()) return e.status().WithPrefix("option --export");
  for (const char* shown : {"format", "json"}) {
    if (args.Has(shown)) {
      return Status::Invalid(std::string("option --export prints the engine's configuration; it "
                                         "contradicts --") +
                             shown);
    }
  }
  return std::optional<Engine>(*e);
}

// A strategy's own flag selects it; contradicting --strategy is an error.
Status ImplyStrategy(const Args& args, const char* flag, Strategy s, PlanOptions* o) {
  if (!args.Has(flag)) return Status::Ok();
  if (o->strategy != Strategy::kAuto && o->strategy != s) {
    return Status::Invalid(std::string("option --") + flag + " applies to --strategy " +
                           ToString(s) + ", not " + ToString(o->strategy));
  }
  o->strategy = s;
  return Status::Ok();
}

Result<PlanOptions> ParseOptions(const Args& args) {
  PlanOptions o;
  if (args.Has("budget")) {
    Result<int64_t> b = ParseBytes(args.Get("budget"));
    if (!b.ok()) return b.status().WithPrefix("option --budget");
    o.budget_bytes = *b;
  }
  if (args.Has("strategy")) {
    Result<Strategy> s = ParseStrategy(args.Get("strategy"));
    if (!s.ok()) return s.status().WithPrefix("option --strategy");
    o.strategy = *s;
  }
  // --every also sets the offload strategy's checkpoint spacing.
  if (o.strategy != Strategy::kOffload) {
    REMAT_RETURN_IF_ERROR(ImplyStrategy(args, "every", Strategy::kUniform, &o));
  }
  REMAT_RETURN_IF_ERROR(ImplyStrategy(args, "segments", Strategy::kSegment, &o));
  REMAT_RETURN_IF_ERROR(ImplyStrategy(args, "checkpoint-layers", Strategy::kManual, &o));
  REMAT_RETURN_IF_ERROR(ImplyStrategy(args, "selective-layers", Strategy::kSelective, &o));
  if (o.strategy == Strategy::kManual && !args.Has("checkpoint-layers")) {
    return Status::Invalid("--strategy manual needs --checkpoint-layers, e.g. 0,4,8");
  }
  REMAT_ASSIGN_OR_RETURN(int64_t every, args.GetInt("every", 0, 1, 1 << 20));
  REMAT_ASSIGN_OR_RETURN(int64_t segments, args.GetInt("segments", 0, 1, 1 << 20));
  REMAT_ASSIGN_OR_RETURN(int64_t slots, args.GetInt("slots", 0, 2, 1 << 20));
  o.every = static_cast<int>(every);
  o.segments = static_cast<int>(segments);
  o.slots = static_cast<int>(slots);
  o.exact_times = args.Has("exact-times");
  REMAT_ASSIGN_OR_RETURN(o.checkpoint_layers, args.GetIntList("checkpoint-layers"));
  REMAT_ASSIGN_OR_RETURN(o.selective_layers, args.GetIntList("selective-layers"));
  REMAT_ASSIGN_OR_RETURN(o.device_memory, ParseDeviceMemory(args));
  if (args.Has("alloc-trace") && !o.device_memory.caching_allocator) {
    return Status::Invalid(
        "option --alloc-trace: the plan has no caching allocator to replay; use a GPU --device "
        "(h100, a100, ...), --alloc-conf or a --cuda-* flag");
  }
  return o;
}

// What goes to standard output.
Result<std::string> Render(Format format, const PlanningResult& result, const Profile& profile,
                           const ReportContext& context, const std::string& command) {
  switch (format) {
    case Format::kJson:
      return PlanToJson(result.plans, profile, context);
    case Format::kMarkdown:
    {
      REMAT_ASSIGN_OR_RETURN(std::string md,
                             MarkdownSummary(result.plans, profile, context, nullptr, command));
      return md + FormatRanksMarkdown(context);
    }
    case Format::kText:
      break;
  }
  return FormatPlanText(result.plans, profile, context);
}

}  // namespace

Status PlanCommand(const std::vector<std::string>& argv, Environment& env) {
  const std::vector<FlagSpec> flags = PlanFlags();
  REMAT_ASSIGN_OR_RETURN(const Args args, Args::Parse(argv, flags));
  if (args.Has("help")) {
    *env.out << "usage: " << kUsage << "\n\n" << FormatFlags(flags);
    return Status::Ok();
  }
  REMAT_ASSIGN_OR_RETURN(const std::string path, InputPath(args, kUsage));
  if (Result<std::string> text = ReadTextFile(path); text.ok() && IsGraphProfileText(*text)) {
    return PlanGraphCommand(args, flags, path, *text, env);
  }
  // A config.json the tracer answers with a graph profile (an
  // encoder-decoder, docs/trace.md) is planned as a graph; a single chain
  // goes on below (LoadJobFromArgs reads the same trace).
  REMAT_ASSIGN_OR_RETURN(const std::optional<std::string> traced, TracedProfilePath(path, args));
  if (traced) {
    if (Result<std::string> text = ReadTextFile(*traced); text.ok() && IsGraphProfileText(*text)) {
      return PlanGraphCommand(args, flags, *traced, *text, env, /*traced=*/true);
    }
  }
  PlanningRequest request;
  REMAT_ASSIGN_OR_RETURN(request.options, ParseOptions(args));
  REMAT_ASSIGN_OR_RETURN(const Format format, ParseFormat(args));
  REMAT_ASSIGN_OR_RETURN(const std::optional<Engine> engine, ParseExport(args));
  REMAT_ASSIGN_OR_RETURN(const ReportFileOptions files, ParseReportFileOptions(args));
  if (!files.html_path.empty()) request.sweep_points = files.pareto_points;
  if (args.Has("global-batch")) {
    for (const char* fixed : {"micro-batch", "grad-accumulation"}) {
      if (args.Has(fixed)) {
        return Status::Invalid(std::string("option --global-batch chooses the micro-batch and "
                                           "accumulation; it contradicts --") +
                               fixed);
      }
    }
    REMAT_ASSIGN_OR_RETURN(request.global_batch, args.GetInt("global-batch", 0, 1, 1 << 24));
  }
  REMAT_ASSIGN_OR_RETURN(const Job job, LoadJobFromArgs(path, args, traced));
  // auto weighs the chunked loss unless the user set it (--chunked-loss 0:
  // off). --export plans the same job; the engine's configuration then runs
  // its chunked loss or the export plans the closest shape without it
  // (PlanForEngine).
  request.weigh_chunked_loss =
      request.options.strategy == Strategy::kAuto && !args.Has("chunked-loss");

  ProgressBar progress(*env.err, WithQuiet(env.progress, args));
  request.progress = progress.Callback();
  REMAT_ASSIGN_OR_RETURN(const PlanningResult result, RunPlanner(job, request));
  progress.Finish();
  for (const std::string& w : result.warnings) *env.err << "planner: warning: " << w << "\n";
  // --global-batch plans another micro-batch, and auto may choose the
  // chunked loss: the reports are about that job.
  const Job& planned = result.planned(job);
  const Profile& profile = result.profile_of(planned);
  const ReportContext context = ReportContextOf(job, result);
  if (args.Has("o")) {
    REMAT_RETURN_IF_ERROR(
        WriteOutputFile(args.Get("o"), PlanToJson(result.plans, profile, context)));
  }
  if (args.Has("alloc-trace")) {
    const Plan& chosen = result.plans.chosen;
    ReplayTrace trace;
    REMAT_ASSIGN_OR_RETURN(const TrainingStepReplay replay,
                           ReplayTrainingSteps(profile, chosen.schedule, chosen.terms.alloc_conf,
                                               {}, kMaxReplayMicroSteps, &trace));
    REMAT_RETURN_IF_ERROR(WriteOutputFile(
        args.Get("alloc-trace"), AllocatorTraceJson(replay, trace, chosen.terms.alloc_conf_text)));
  }
  const std::string command = CommandLine(argv);
  REMAT_RETURN_IF_ERROR(WriteReportFiles(files, result.plans, profile, context, nullptr,
                                         result.sweep ? &*result.sweep : nullptr, command));
  if (engine) {
    REMAT_ASSIGN_OR_RETURN(const EnginePlan exported,
                           PlanForEngine(planned, request.options, result.plans.chosen, *engine));
    *env.err << "planner: export: " << ExportNote(exported, result.plans.chosen) << "\n";
    *env.out << RenderExport(exported, profile, context);
    if (!exported.plan.fits && !result.advice) {
      return Status::NoFit(std::string("no plan ") + ToString(*engine) +
                           " can express fits the budget; remat.apply(model, plan) runs " +
                           "the plan that fits");
    }
    return result.fit_status();
  }
  // With -o the plan JSON goes to the file and the terminal gets the report.
  const Format shown = format == Format::kJson && args.Has("o") ? Format::kText : format;
  REMAT_ASSIGN_OR_RETURN(const std::string out, Render(shown, result, profile, context, command));
  if (result.batch && shown == Format::kText) *env.out << FormatBatchSearchText(*result.batch);
  *env.out << out;
  return result.fit_status();
}

}  // namespace remat::cli
