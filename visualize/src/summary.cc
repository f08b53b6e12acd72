#include "summary.h"

#include <cmath>
#include <cstdio>

#include "measured.h"
#include "palette.h"
#include "remat/io/units.h"

namespace remat::viz {
namespace {

std::string Percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

// "+14.3%", "-2.0%"; what rounds to zero is "+0.0%" (never "+-0.0%").
std::string SignedPercent(double part, double whole) {
  double v = whole > 0 ? 100.0 * part / whole : 0.0;
  if (std::fabs(v) < 0.05) v = 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", v);
  return buf;
}

std::string Decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string DescribePeakOp(const Plan& plan, const Profile& profile) {
  const int i = plan.predicted.peak_op;
  if (i < 0) return "";
  const Op& op = plan.schedule.ops[i];
  std::string s = "op " + std::to_string(i) + ": " + DescribeOp(op);
  if (op.layer >= 0) s += " ('" + profile.layers[op.layer].name + "')";
  return s;
}

std::vector<SummaryRow> Inputs(const ReportData& data, const Plan& plan) {
  const Profile& p = *data.profile;
  const ReportContext& ctx = *data.context;
  std::vector<SummaryRow> rows;
  rows.push_back({"input", ctx.input_path + " (" + ctx.input_kind + "; " + p.source + " profile" +
                               (p.device.empty() ? "" : ", times for " + p.device) + ")"});
  if (ctx.has_config) {
    const ModelConfig& c = ctx.config;
    rows.push_back({"model", std::string(ToString(c.architecture)) + ", " +
                                 std::to_string(c.layers) + " layers, hidden " +
                                 std::to_string(c.hidden) + ", " + std::to_string(c.heads) +
                                 " heads, ffn " + std::to_string(c.ffn_hidden) + ", vocab " +
                                 std::to_string(c.vocab)});
  }
  if (p.parameters > 0) rows.push_back({"parameters", FormatCount(p.parameters)});
  rows.push_back({"budget", plan.budget_bytes > 0 ? FormatBytes(plan.budget_bytes) + " (" +
                                                        FormatCount(plan.budget_bytes) + " bytes)"
                                                  : "none given"});
  if (ctx.has_config) {
    const ModelConfig& c = ctx.config;
    rows.push_back({"precision", ToString(c.precision)});
    rows.push_back({"micro-batch",
                    std::to_string(c.micro_batch) + " x " + std::to_string(c.seq_len) + " tokens"});
    rows.push_back({"accumulation", std::to_string(c.grad_accumulation) + " micro-batch" +
                                        (c.grad_accumulation == 1 ? "" : "es") + " per step"});
    rows.push_back({"optimizer", std::string(ToString(c.optimizer)) + ", " + ToString(c.attention) +
                                     " attention, dropout " + Decimal(c.dropout)});
  } else if (p.micro_batch > 0) {
    rows.push_back({"micro-batch",
                    std::to_string(p.micro_batch) + " x " + std::to_string(p.seq_len) + " tokens"});
  }
  return rows;
}

std::vector<BreakdownRow> AtPeak(const Plan& plan, const Profile& p) {
  const SimulationResult& r = plan.predicted;
  const double peak = static_cast<double>(r.peak_bytes);
  const std::string state = CategoryColor(MemoryCategory::kModelState);
  std::vector<BreakdownRow> rows = {
      {"parameters", state, p.static_memory.parameter_bytes, "", ""},
      {"gradients", state, p.static_memory.gradient_bytes, "", ""},
      {"optimizer state", state, p.static_memory.optimizer_bytes, "", ""}};
  // The step's buffers (an eager decoder's causal mask, rotary tables):
  // counted with the model state, named apart as the text report does.
  if (p.static_memory.buffer_bytes > 0) {
    rows.push_back({"buffers", state, p.static_memory.buffer_bytes, "", ""});
  }
  for (MemoryCategory c : {MemoryCategory::kParameterGrads, MemoryCategory::kActivations,
                           MemoryCategory::kRecomputed, MemoryCategory::kGradients,
                           MemoryCategory::kWorkspace}) {
    rows.push_back({CategoryLabel(c), CategoryColor(c), r.at_peak[c], "", ""});
  }
  for (BreakdownRow& row : rows) {
    row.size = FormatBytes(row.bytes);
    row.percent = Percent(static_cast<double>(row.bytes), peak);
  }
  return rows;
}

std::vector<ComparisonRow> Measured(const Plan& plan, const TrainResult& run) {
  const SimulationResult& r = plan.predicted;
  const int64_t peak = MeasuredPeakBytes(run);
  std::vector<ComparisonRow> rows = {
      {"peak memory", FormatBytes(r.peak_bytes), FormatBytes(peak),
       RelativeError(static_cast<double>(peak), static_cast<double>(r.peak_bytes))},
      {"step time", FormatMillis(r.step_ms), FormatMillis(run.step_ms),
       RelativeError(run.step_ms, r.step_ms)},
      {"recompute time", FormatMillis(r.recompute_ms), FormatMillis(run.recompute_ms),
       RelativeError(run.recompute_ms, r.recompute_ms)}};
  if (run.reserved_peak_bytes > 0) {
    rows.push_back({"reserved (allocator)", "-", FormatBytes(run.reserved_peak_bytes), ""});
  }
  return rows;
}

}  // namespace

ReportSummary Summarize(const ReportData& data) {
  const PlanSet& plans = *data.plans;
  const Plan& plan = plans.chosen;
  const Profile& p = *data.profile;
  const SimulationResult& r = plan.predicted;
  const double base = BaselineStepMs(p);
  ReportSummary s;
  s.model = p.model.empty() ? data.context->input_path : p.model;
  s.fits = plan.fits;
  s.verdict = plan.budget_bytes <= 0 ? "NO BUDGET" : plan.fits ? "FITS" : "DOES NOT FIT";
  s.plan = PlanName(plan.strategy, plan.parameter);
  if (plans.auto_selected) {  // as the terminal report says it
    s.how_chosen = plan.fits ? ", chosen by auto as the fastest plan that fits"
                             : ": nothing fits, this is the plan with the lowest peak";
  }
  // With device terms the budget holds the device peak (remat/device/device_memory.h).
  const int64_t peak = plan.memory.total_bytes;
  s.peak = FormatBytes(peak);
  s.budget = plan.budget_bytes > 0 ? FormatBytes(plan.budget_bytes) : "none";
  s.budget_share = plan.budget_bytes > 0
                       ? Percent(static_cast<double>(peak), static_cast<double>(plan.budget_bytes))
                       : "";
  s.step = FormatMillis(r.step_ms);
  s.recompute = FormatMillis(r.recompute_ms);
  s.overhead = SignedPercent(r.step_ms - base, base);
  s.peak_op = DescribePeakOp(plan, p);
  s.inputs = Inputs(data, plan);

  std::string peak_line = s.peak;
  if (plan.budget_bytes > 0) {
    peak_line += " of " + s.budget + " budget (" + s.budget_share + ")  " +
                 (plan.fits ? "FITS" : "DOES NOT FIT");
  }
  const DeviceMemoryUse& m = plan.memory;
  s.figures = {{plan.terms.any() ? "device peak" : "predicted peak", peak_line}};
  if (plan.terms.any()) {
    s.figures.push_back({"allocated peak", FormatBytes(m.allocated_peak_bytes)});
    s.figures.push_back({"reserved peak", FormatBytes(m.reserved_peak_bytes) + " (" +
                                              DescribeReservedPeak(plan) + ")"});
    if (m.replay_margin_bytes > 0) {
      s.figures.push_back({"replay margin", FormatBytes(m.replay_margin_bytes) + " (" +
                                                DescribeReplayMargin(plan) + ")"});
    }
    s.figures.push_back({"fixed terms", "cuda_context " + FormatBytes(m.cuda_context_bytes) +
                                            " + workspaces " + FormatBytes(m.workspace_bytes) +
                                            " (" + plan.terms.source + ")"});
  }
  s.figures.push_back({"activations", FormatBytes(r.activation_peak_bytes) + " at peak (" +
                                          DescribeModelState(r.static_bytes, p) + ")"});
  s.figures.push_back({"step time", s.step + " (recompute " + s.recompute + ", " + s.overhead +
                                        " over no checkpointing)"});
  if (!s.peak_op.empty()) s.figures.push_back({"peak reached at", s.peak_op});

  const SimulationResult& b = plans.baseline.predicted;
  s.baseline = "peak " + FormatBytes(plans.baseline.memory.total_bytes) + " (" +
               DescribeModelState(b.static_bytes, p) + " + activations " +
               FormatBytes(b.activation_peak_bytes) + "), step " + FormatMillis(b.step_ms);
  if (plan.budget_bytes > 0) s.baseline += plans.baseline.fits ? ", fits" : ", does not fit";
  s.baseline_peak = FormatBytes(plans.baseline.memory.total_bytes);
  s.baseline_step = FormatMillis(b.step_ms);
  s.baseline_fits = plan.budget_bytes <= 0 || plans.baseline.fits;
  s.recompute_share = Percent(r.recompute_ms, r.step_ms);
  if (r.recompute_ops > 0) {
    s.recompute_where = ", " + std::to_string(r.recompute_ops) + " recompute op" +
                        (r.recompute_ops == 1 ? "" : "s");
  }
  if (r.recompute_ms > 0) {
    for (LayerDecision d : plan.decisions) {
      if (d == LayerDecision::kSelective) {
        s.recompute_where +=
            s.recompute_where.empty() ? ", inside selective backwards" : " + selective backwards";
        break;
      }
    }
  }

  s.at_peak = AtPeak(plan, p);
  s.total = FormatBytes(r.peak_bytes);
  for (const Plan& c : plans.candidates) {
    s.strategies.push_back({ToString(c.strategy), c.parameter.empty() ? "-" : c.parameter,
                            FormatBytes(c.memory.total_bytes), FormatMillis(c.predicted.step_ms),
                            FormatMillis(c.predicted.recompute_ms), c.fits,
                            c.strategy == plan.strategy && c.parameter == plan.parameter});
  }
  if (data.measured != nullptr) {
    s.measured = Measured(plan, *data.measured);
    s.measured_device = data.measured->device;
    if (data.measured->provenance.present()) {
      s.measured_device += "; " + DescribeProvenance(data.measured->provenance);
    }
  }
  s.note = data.context->note;
  return s;
}

}  // namespace remat::viz
