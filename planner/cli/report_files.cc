#include "report_files.h"

#include "remat/io/io.h"
#ifdef REMAT_HAVE_VISUALIZE
#include "remat/visualize.h"
#endif

namespace remat::cli {
namespace {

const char kWithoutVisualize[] =
    "--report, --trace and --format md need the visualize library, which this planner was built "
    "without";

#ifdef REMAT_HAVE_VISUALIZE
ReportData MakeReportData(const PlanSet& plans, const Profile& profile,
                          const ReportContext& context, const TrainResult* measured,
                          const std::string& command) {
  ReportData data;
  data.plans = &plans;
  data.profile = &profile;
  data.context = &context;
  data.measured = measured;
  data.command = command;
  return data;
}
#endif

}  // namespace

std::vector<FlagSpec> ReportFileFlags() {
  return {
      {"report", "FILE", "write a self-contained HTML report (charts, tables) to FILE"},
      {"trace", "FILE", "write a Chrome trace (Perfetto, chrome://tracing) of the step to FILE"},
      {"pareto-points", "N", "budgets in the report's Pareto chart (default 12; 0 = no chart)"},
  };
}

Result<ReportFileOptions> ParseReportFileOptions(const Args& args) {
  ReportFileOptions o;
  o.html_path = args.Get("report");
  o.trace_path = args.Get("trace");
  if (args.Has("report") && o.html_path.empty()) {
    return Status::Invalid("option --report needs a file name");
  }
  if (args.Has("trace") && o.trace_path.empty()) {
    return Status::Invalid("option --trace needs a file name");
  }
  REMAT_ASSIGN_OR_RETURN(int64_t points, args.GetInt("pareto-points", 12, 0, 200));
  if (points == 1) return Status::Invalid("option --pareto-points: use 0 (no chart) or at least 2");
  o.pareto_points = static_cast<int>(points);
  if (!kHaveVisualize && (!o.html_path.empty() || !o.trace_path.empty())) {
    return Status::Invalid(kWithoutVisualize);
  }
  return o;
}

Status WriteReportFiles(const ReportFileOptions& options, const PlanSet& plans,
                        const Profile& profile, const ReportContext& context,
                        const TrainResult* measured, const ParetoCurve* sweep,
                        const std::string& command) {
#ifdef REMAT_HAVE_VISUALIZE
  ReportData data = MakeReportData(plans, profile, context, measured, command);
  if (!options.trace_path.empty()) {
    REMAT_ASSIGN_OR_RETURN(std::string trace, RenderChromeTrace(data));
    REMAT_RETURN_IF_ERROR(WriteOutputFile(options.trace_path, trace));
  }
  if (!options.html_path.empty()) {
    data.pareto = sweep;
    REMAT_ASSIGN_OR_RETURN(std::string html, RenderHtmlReport(data));
    REMAT_RETURN_IF_ERROR(WriteOutputFile(options.html_path, html));
  }
  return Status::Ok();
#else
  (void)plans, (void)profile, (void)context, (void)measured, (void)sweep, (void)command;
  if (options.html_path.empty() && options.trace_path.empty()) return Status::Ok();
  return Status::Invalid(kWithoutVisualize);
#endif
}

Result<std::string> MarkdownSummary(const PlanSet& plans, const Profile& profile,
                                    const ReportContext& context, const TrainResult* measured,
                                    const std::string& command) {
#ifdef REMAT_HAVE_VISUALIZE
  return RenderMarkdown(MakeReportData(plans, profile, context, measured, command));
#else
  (void)plans, (void)profile, (void)context, (void)measured, (void)command;
  return Status::Invalid(kWithoutVisualize);
#endif
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string s = "planner";
  for (const std::string& a : argv) {
    const bool quote = a.empty() || a.find_first_of(" \t\"'$`\\") != std::string::npos;
    s += " ";
    if (!quote) {
      s += a;
      continue;
    }
    s += "'";
    for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += "'";
  }
  return s;
}

}  // namespace remat::cli
