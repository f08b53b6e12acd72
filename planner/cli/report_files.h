// --report, --trace and --pareto-points: the visual outputs a planning
// command writes beside its terminal output. `planner plan` uses them; a
// command that also has a measured run (planner train) passes it in
// ReportData::measured to get the overlay.
#ifndef REMAT_CLI_REPORT_FILES_H_
#define REMAT_CLI_REPORT_FILES_H_

#include <string>
#include <vector>

#include "args.h"
#include "remat/planning/pareto.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/report/report.h"
#include "remat/schedule/runtime_api.h"
#include "remat/io/status.h"

namespace remat::cli {

// Whether this planner was built with the visualize library (--report,
// --trace and --format md need it).
#ifdef REMAT_HAVE_VISUALIZE
inline constexpr bool kHaveVisualize = true;
#else
inline constexpr bool kHaveVisualize = false;
#endif

std::vector<FlagSpec> ReportFileFlags();

struct ReportFileOptions {
  std::string html_path;   // --report: the HTML report; empty = none
  std::string trace_path;  // --trace: Chrome trace JSON; empty = none
  int pareto_points = 12;  // budgets in the report's Pareto sweep; 0 = no Pareto chart
};

// Reads the flags; errors name the flag. Parse before doing any work so that
// bad input writes nothing.
Result<ReportFileOptions> ParseReportFileOptions(const Args& args);

// Writes the requested files (each atomically): renders only, plans
// nothing. `measured` (a run to overlay) and `sweep` (the HTML report's
// Pareto chart, planned by the caller with options.pareto_points budgets)
// may be null. `command` is printed in the report's footer. Does nothing
// when no file is requested.
Status WriteReportFiles(const ReportFileOptions& options, const PlanSet& plans,
                        const Profile& profile, const ReportContext& context,
                        const TrainResult* measured, const ParetoCurve* sweep,
                        const std::string& command);

// The Markdown summary (--format md) of the same data.
Result<std::string> MarkdownSummary(const PlanSet& plans, const Profile& profile,
                                    const ReportContext& context, const TrainResult* measured,
                                    const std::string& command);

// "planner --budget 24GB ..." from the arguments, for the report's footer.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace remat::cli

#endif  // REMAT_CLI_REPORT_FILES_H_
