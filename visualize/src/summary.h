// The figures a report states in words and tables, formatted once so the
// HTML page and the Markdown summary print the same strings (and the same
// numbers as the terminal report: FormatBytes / FormatMillis of the
// simulator's results).
#ifndef REMAT_VISUALIZE_SUMMARY_H_
#define REMAT_VISUALIZE_SUMMARY_H_

#include <string>
#include <vector>

#include "remat/visualize.h"

namespace remat::viz {

struct SummaryRow {
  std::string label;
  std::string value;
};

struct BreakdownRow {
  std::string label;  // "activations kept"
  std::string color;  // the category's colour (model state rows share one)
  int64_t bytes = 0;
  std::string size;     // FormatBytes(bytes)
  std::string percent;  // of the peak: "64.1%"
};

struct StrategyRow {
  std::string strategy, setting, peak, step, recompute;
  bool fits = false;
  bool chosen = false;
};

// Predicted against measured, one metric per row.
struct ComparisonRow {
  std::string metric, predicted, measured, error;
};

struct ReportSummary {
  std::string model;    // model name, or the input path
  std::string verdict;  // "FITS", "DOES NOT FIT" or "NO BUDGET"
  bool fits = true;
  std::string plan;        // "selective (9/12 blocks)"
  std::string how_chosen;  // ", chosen by auto as the fastest plan that fits" (follows `plan`)
  // Headline figures.
  std::string peak, budget, budget_share, step, recompute, overhead, peak_op;
  std::vector<SummaryRow> inputs;   // model, input, budget, precision, micro-batch, ...
  std::vector<SummaryRow> figures;  // the terminal report's plan lines
  std::string baseline;             // "peak 34.04 GiB (...), step 371.9 ms, does not fit"
  std::string baseline_peak, baseline_step;
  bool baseline_fits = true;
  std::string recompute_share;        // of the step time: "12.5%"
  std::string recompute_where;        // ", 12 recompute ops" / ", inside selective backwards"
  std::vector<BreakdownRow> at_peak;  // parameters ... workspace (no total)
  std::string total;                  // FormatBytes(peak)
  std::vector<StrategyRow> strategies;
  std::vector<ComparisonRow> measured;  // empty without a run
  std::string measured_device;
  std::string note;
};

// Requires CheckReportData(data).ok().
ReportSummary Summarize(const ReportData& data);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_SUMMARY_H_
