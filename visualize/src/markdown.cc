// RenderMarkdown: the summary as GitHub-flavoured Markdown, for pasting into
// issues and PRs. Same strings as the HTML page (ReportSummary).
#include <sstream>

#include "layer_rows.h"
#include "remat/io/units.h"
#include "remat/visualize.h"
#include "summary.h"

namespace remat {
namespace {

// Table cells must not break the table: escape pipes, flatten newlines.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

void KeyValues(std::ostringstream& o, const std::vector<viz::SummaryRow>& rows) {
  o << "| | |\n|---|---|\n";
  for (const viz::SummaryRow& r : rows)
    o << "| " << Cell(r.label) << " | " << Cell(r.value) << " |\n";
}

}  // namespace

Result<std::string> RenderMarkdown(const ReportData& data) {
  REMAT_RETURN_IF_ERROR(CheckReportData(data));
  const viz::ReportSummary s = viz::Summarize(data);
  std::ostringstream o;
  o << "### remat plan for " << Cell(s.model) << ": " << Cell(s.plan) << ", **" << s.verdict
    << "**\n\n";
  if (!s.how_chosen.empty()) o << "Plan " << Cell(s.plan + s.how_chosen) << ".\n\n";
  if (!s.note.empty()) o << "> " << Cell(s.note) << "\n\n";
  std::vector<viz::SummaryRow> figures = s.figures;
  figures.push_back({"without checkpointing", s.baseline});
  KeyValues(o, figures);

  if (!s.measured.empty()) {
    o << "\n**Predicted vs measured** (" << Cell(s.measured_device) << ")\n\n"
      << "| metric | predicted | measured | error |\n|---|---:|---:|---:|\n";
    for (const viz::ComparisonRow& r : s.measured) {
      o << "| " << r.metric << " | " << r.predicted << " | " << r.measured << " | " << r.error
        << " |\n";
    }
  }

  o << "\n**Memory at the peak**\n\n| category | bytes | share |\n|---|---:|---:|\n";
  for (const viz::BreakdownRow& r : s.at_peak) {
    o << "| " << r.label << " | " << r.size << " | " << r.percent << " |\n";
  }
  o << "| **total** | **" << s.total << "** | |\n";

  if (!s.strategies.empty()) {
    o << "\n**Strategies**\n\n| strategy | setting | peak | step | recompute | fits |\n"
      << "|---|---|---:|---:|---:|---|\n";
    for (const viz::StrategyRow& r : s.strategies) {
      const std::string b = r.chosen ? "**" : "";
      o << "| " << b << Cell(r.strategy) << b << (r.chosen ? " (chosen)" : "") << " | "
        << Cell(r.setting) << " | " << r.peak << " | " << r.step << " | " << r.recompute << " | "
        << (r.fits ? "yes" : "no") << " |\n";
    }
  }

  o << "\n<details><summary>Inputs</summary>\n\n";
  KeyValues(o, s.inputs);
  o << "\n</details>\n";

  const std::vector<viz::LayerRow> layers = viz::LayerRows(data.plans->chosen, *data.profile);
  o << "\n<details><summary>Layers (" << layers.size() << ")</summary>\n\n"
    << "| # | layer | decision | kept | recomputed | at peak | fwd | bwd | recompute |\n"
    << "|---:|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const viz::LayerRow& r : layers) {
    o << "| " << r.index << " | " << Cell(r.name) << " | " << ToString(r.decision)
      << (r.option.empty() ? "" : " (" + Cell(r.option) + ")") << " | " << FormatBytes(r.kept_bytes)
      << " | " << FormatBytes(r.recomputed_bytes) << " | " << FormatBytes(r.at_peak_bytes) << " | "
      << FormatMillis(r.forward_ms) << " | " << FormatMillis(r.backward_ms) << " | "
      << FormatMillis(r.recompute_ms) << " |\n";
  }
  o << "\n</details>\n";
  if (!data.command.empty()) {
    std::string command = data.command;  // a backtick would end the code span
    for (char& c : command) c = c == '`' ? '\'' : c;
    o << "\n<sub>`" << command << "`</sub>\n";
  }
  return o.str();
}

}  // namespace remat
