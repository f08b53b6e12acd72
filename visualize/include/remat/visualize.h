// Reports people would rather look at than read: a self-contained HTML page
// with inline SVG charts, a Chrome trace (Perfetto, chrome://tracing) and a
// Markdown summary. All three render one ReportData; none of them computes a
// figure of its own: memory and times come from the simulator's
// SimulationResult (and, when given, the runtime's measured TrainResult).
#ifndef REMAT_VISUALIZE_H_
#define REMAT_VISUALIZE_H_

#include <string>

#include "remat/planning/pareto.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/report/report.h"
#include "remat/schedule/runtime_api.h"
#include "remat/io/status.h"

namespace remat {

// Everything a report shows. The pointers are not owned and must outlive the
// Render* call.
struct ReportData {
  const PlanSet* plans = nullptr;          // required: chosen plan, baseline, candidates
  const Profile* profile = nullptr;        // required: the profile `plans` were made for
  const ReportContext* context = nullptr;  // required: input file, model config, note
  // Optional: every strategy over a range of budgets (the HTML Pareto chart).
  const ParetoCurve* pareto = nullptr;
  // Optional: a run of the chosen plan's schedule on real hardware. Its ops
  // are matched to the schedule by OpSample::op_index; the HTML timeline
  // overlays measured memory on the predicted one, the trace adds a
  // "measured" process, the summaries add predicted-vs-measured rows.
  const TrainResult* measured = nullptr;
  // Optional: how the report was produced ("planner --budget 24GB ..."),
  // printed in the HTML footer and the Markdown summary.
  std::string command;
};

// OK if `data` can be rendered: the required pointers are set, the profile,
// decisions and timeline agree in size, and measured op indices (if any) lie
// within the schedule. The Render* functions call it first.
Status CheckReportData(const ReportData& data);

// One self-contained HTML page (inline CSS and SVG, no script, no network):
// inputs, summary, the memory timeline stacked by category with the budget
// and the peak, per-layer bars, and the Pareto chart when `pareto` is set.
Result<std::string> RenderHtmlReport(const ReportData& data);

// Chrome trace event JSON: each timed op of the chosen schedule as a complete
// ("X") event at its simulated start and duration (microseconds), and memory
// as counter ("C") events in bytes: "memory" stacked by category and
// "memory total", whose maximum is the predicted peak. A measured run adds a
// second process with its own op events and memory counter.
Result<std::string> RenderChromeTrace(const ReportData& data);

// A Markdown summary for issues and PRs: verdict, inputs, the plan's figures
// (the same numbers as the terminal report), memory at the peak, the
// strategies, measured-vs-predicted when a run is given, and the per-layer
// decisions in a collapsed section.
Result<std::string> RenderMarkdown(const ReportData& data);

}  // namespace remat

#endif  // REMAT_VISUALIZE_H_
