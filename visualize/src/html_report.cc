// RenderHtmlReport: the page around the charts. Tables and cards print the
// strings of ReportSummary; charts read the plan and profile directly.
#include <algorithm>
#include <sstream>

#include "html_style.h"
#include "layer_chart.h"
#include "layer_rows.h"
#include "pareto_chart.h"
#include "remat/io/units.h"
#include "remat/visualize.h"
#include "scale.h"
#include "summary.h"
#include "svg.h"
#include "timeline_chart.h"

namespace remat {
namespace {

using viz::EscapeXml;

std::string Td(const std::string& text, const char* cls = nullptr) {
  return std::string("<td") + (cls ? std::string(" class=\"") + cls + "\"" : "") + ">" +
         EscapeXml(text) + "</td>";
}

std::string KeyValueTable(const std::vector<viz::SummaryRow>& rows) {
  std::string h = "<table>";
  for (const viz::SummaryRow& r : rows) h += "<tr>" + Td(r.label, "key") + Td(r.value) + "</tr>";
  return h + "</table>";
}

std::string Card(const std::string& label, const std::string& value, const std::string& sub,
                 const std::string& extra = "") {
  return "<div class=\"card\"><div class=\"label\">" + EscapeXml(label) +
         "</div><div class=\"value\">" + EscapeXml(value) + "</div><div class=\"sub\">" +
         EscapeXml(sub) + "</div>" + extra + "</div>";
}

std::string Panel(const std::string& id, const std::string& title, const std::string& caption,
                  const std::string& body) {
  return "<section class=\"panel\" id=\"" + id + "\"><h2>" + EscapeXml(title) + "</h2>" +
         (caption.empty() ? "" : "<p class=\"caption\">" + EscapeXml(caption) + "</p>") + body +
         "</section>\n";
}

std::string Header(const viz::ReportSummary& s) {
  const char* cls = s.verdict == "FITS" ? "" : s.verdict == "NO BUDGET" ? " none" : " bad";
  std::string h = "<header><div class=\"eyebrow\">remat memory report</div><h1>" +
                  EscapeXml(s.model) + "<span class=\"verdict" + cls + "\">" + s.verdict +
                  "</span></h1><p class=\"lead\">Plan: <strong>" + EscapeXml(s.plan) + "</strong>" +
                  EscapeXml(s.how_chosen) + "</p><div class=\"chips\">";
  for (const viz::SummaryRow& r : s.inputs) {
    if (r.label == "input" || r.label == "model") continue;
    h += "<span class=\"chip\"><b>" + EscapeXml(r.label) + "</b>" + EscapeXml(r.value) + "</span>";
  }
  return h + "</div></header>\n";
}

std::string Cards(const viz::ReportSummary& s, const ReportData& data) {
  const Plan& plan = data.plans->chosen;
  std::string meter;
  if (plan.budget_bytes > 0) {
    const double share = std::min(100.0, 100.0 * static_cast<double>(plan.memory.total_bytes) /
                                             static_cast<double>(plan.budget_bytes));
    meter = std::string("<div class=\"meter") + (s.fits ? "" : " bad") +
            "\"><span style=\"width:" + viz::Num(share) + "%\"></span></div>";
  }
  std::string h = "<section class=\"cards\">";
  h += Card("Predicted peak", s.peak,
            plan.budget_bytes > 0 ? "of " + s.budget + " budget (" + s.budget_share + ")"
                                  : "no budget given",
            meter);
  h += Card("Step time", s.step, s.overhead + " over no checkpointing");
  h += Card("Recompute", s.recompute, s.recompute_share + " of the step" + s.recompute_where);
  h += Card("Without checkpointing", s.baseline_peak,
            "step " + s.baseline_step +
                (plan.budget_bytes > 0 ? (s.baseline_fits ? ", fits" : ", does not fit") : ""));
  if (!s.measured.empty()) {
    h += Card("Measured peak", s.measured[0].measured,
              s.measured[0].error + " vs predicted (" + s.measured_device + ")");
  }
  return h + "</section>\n";
}

std::string BreakdownTable(const viz::ReportSummary& s, int64_t peak) {
  std::string h =
      "<table><tr><th>category</th><th class=\"num\">bytes</th>"
      "<th class=\"num\">share</th><th></th></tr>";
  for (const viz::BreakdownRow& r : s.at_peak) {
    const double width =
        peak > 0 ? 120.0 * static_cast<double>(r.bytes) / static_cast<double>(peak) : 0;
    h += "<tr><td><span class=\"swatch\" style=\"background:" + r.color + "\"></span>" +
         EscapeXml(r.label) + "</td>" + Td(r.size, "num") + Td(r.percent, "num") +
         "<td><span class=\"share\" style=\"width:" + viz::Num(width) + "px;background:" + r.color +
         "\"></span></td></tr>";
  }
  return h + "<tr class=\"total\"><td>total</td>" + Td(s.total, "num") +
         "<td></td><td></td></tr></table>";
}

std::string StrategyTable(const viz::ReportSummary& s) {
  std::string h =
      "<table><tr><th>strategy</th><th>setting</th><th class=\"num\">peak</th>"
      "<th class=\"num\">step</th><th class=\"num\">recompute</th><th>fits</th></tr>";
  for (const viz::StrategyRow& r : s.strategies) {
    h += std::string("<tr") + (r.chosen ? " class=\"chosen\"" : "") + ">" +
         Td(r.strategy + (r.chosen ? " (chosen)" : ""), "nowrap") + Td(r.setting, "nowrap") +
         Td(r.peak, "num") + Td(r.step, "num") + Td(r.recompute, "num") +
         Td(r.fits ? "yes" : "no", r.fits ? "yes" : "no") + "</tr>";
  }
  return h + "</table>";
}

std::string MeasuredTable(const viz::ReportSummary& s) {
  std::string h =
      "<table><tr><th>metric</th><th class=\"num\">predicted</th>"
      "<th class=\"num\">measured</th><th class=\"num\">error</th></tr>";
  for (const viz::ComparisonRow& r : s.measured) {
    h += "<tr>" + Td(r.metric) + Td(r.predicted, "num") + Td(r.measured, "num") +
         Td(r.error, "num") + "</tr>";
  }
  return h + "</table>";
}

std::string TimelineCaption(const viz::ReportSummary& s, const ReportData& data) {
  std::string c =
      "Memory live at each op's peak, stacked by category, over the simulated step "
      "(forward, then backward with its recomputes, then the optimizer step). ";
  const Plan& plan = data.plans->chosen;
  if (plan.budget_bytes > 0) {
    c += viz::OffScale(static_cast<double>(plan.budget_bytes),
                       viz::TimelineDataMaxBytes(plan, data.measured))
             ? "The budget, " + s.budget +
                   ", is far above every value shown: the axis follows the data and the budget "
                   "is marked off scale at the top right. "
             : std::string("The dashed red line is the budget. ");
  }
  c += "The ring marks the peak: " + s.peak + " at " + s.peak_op + ". ";
  if (data.measured != nullptr) {
    c += "The black line is the measured run (" + s.measured_device +
         "), drawn op by op at the predicted times. ";
  }
  return c + "Hover an op for its figures.";
}

std::string ParetoCaption(const ParetoCurve& curve) {
  std::string c =
      "The fastest plan of each strategy at " + std::to_string(curve.budgets.size()) + " budgets";
  if (!curve.budgets.empty()) {
    c += " from " + FormatBytes(curve.budgets.front()) + " to " + FormatBytes(curve.budgets.back());
  }
  return c +
         " (a point no faster than one at a smaller budget is dropped). Lower left is better; "
         "the ring is the chosen plan.";
}

}  // namespace

Result<std::string> RenderHtmlReport(const ReportData& data) {
  REMAT_RETURN_IF_ERROR(CheckReportData(data));
  const viz::ReportSummary s = viz::Summarize(data);
  const Plan& plan = data.plans->chosen;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    << "<title>remat: " << EscapeXml(s.model) << " (" << EscapeXml(s.plan) << ", " << s.verdict
    << ")</title>\n<style>" << viz::kReportCss << "</style></head>\n<body><main>\n";
  h << Header(s);
  if (!s.note.empty()) h << "<p class=\"note\">" << EscapeXml(s.note) << "</p>\n";
  h << Cards(s, data);
  h << Panel("timeline", "Memory over the step", TimelineCaption(s, data),
             viz::TimelineChart(plan, *data.profile, data.measured));
  if (!s.measured.empty()) {
    h << Panel("measured", "Predicted vs measured",
               "The runtime executed the same schedule on " + s.measured_device + ".",
               MeasuredTable(s));
  }
  std::vector<viz::SummaryRow> figures = s.figures;
  figures.push_back({"without checkpointing", s.baseline});
  h << "<div class=\"grid2\">" << Panel("summary", "Plan", "", KeyValueTable(figures))
    << Panel("inputs", "Inputs", "", KeyValueTable(s.inputs)) << "</div>\n";
  h << "<div class=\"grid2\">"
    << Panel("breakdown", "Memory at the peak", "", BreakdownTable(s, plan.predicted.peak_bytes))
    << Panel("strategies", "Strategies",
             "The best setting of each strategy" +
                 std::string(plan.budget_bytes > 0 ? " under the budget." : "."),
             StrategyTable(s))
    << "</div>\n";
  h << Panel("layers", "Layers",
             "What each layer keeps from its forward for its backward and what is recomputed, "
             "and where the step's time goes. Hover a row for its figures.",
             viz::LayerChart(viz::LayerRows(plan, *data.profile)));
  if (data.pareto != nullptr && !data.pareto->points.empty()) {
    h << Panel("pareto", "Step time against peak memory", ParetoCaption(*data.pareto),
               viz::ParetoChart(*data.pareto, plan));
  }
  h << "<footer>Generated by remat from " << EscapeXml(data.context->input_path)
    << ". Every figure comes from simulating the plan's schedule on the "
    << EscapeXml(data.profile->source) << " profile"
    << (data.measured != nullptr ? ", except the measured ones" : "") << ".";
  if (!data.command.empty()) h << " Command: <code>" << EscapeXml(data.command) << "</code>";
  h << "</footer>\n</main></body></html>\n";
  return h.str();
}

}  // namespace remat
