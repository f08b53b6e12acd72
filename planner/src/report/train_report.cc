#include "remat/report/train_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "remat/io/units.h"

namespace remat {
namespace {

std::string Fixed(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// "+1.53 MiB" / "-512 B" / "0 B"
std::string SignedBytes(int64_t delta) {
  if (delta == 0) return "0 B";
  return (delta > 0 ? "+" : "-") + FormatBytes(delta > 0 ? delta : -delta);
}

double PercentOf(int64_t measured, int64_t predicted) {
  return predicted > 0 ? 100.0 * static_cast<double>(measured - predicted) / predicted : 0;
}

double Ratio(double measured, double predicted) { return predicted > 0 ? measured / predicted : 0; }

int MeasuredPeakOp(const TrainResult& r) {
  int best = -1;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    if (best < 0 || r.ops[i].peak > r.ops[best].peak) best = static_cast<int>(i);
  }
  return best;
}

std::string OpLabel(const TrainComparison& c, int index) {
  if (index < 0 || index >= static_cast<int>(c.plan.schedule.ops.size())) return "-";
  const Op& op = c.plan.schedule.ops[index];
  std::string s = "op " + std::to_string(index) + " " + DescribeOp(op);
  if (op.layer >= 0 && op.layer < c.plan.profile.num_layers()) {
    s += " (" + c.plan.profile.layers[op.layer].name + ")";
  }
  return s;
}

double PredictedMs(const TimelinePoint& p) { return p.end_ms - p.start_ms; }

}  // namespace

std::string FormatStepLine(const StepRecord& s) {
  return "step " + Fixed(s.step, "%4.0f") + "  loss " + Fixed(s.loss, "%.4f") + "  peak " +
         Pad(FormatBytes(s.peak_bytes), 11) + " time " + FormatMillis(s.step_ms) +
         (s.recompute_ms > 0 ? " (recompute " + FormatMillis(s.recompute_ms) + ")" : "") + "\n";
}

std::string FormatTrainText(const TrainComparison& c) {
  const SimulationResult& p = c.predicted;
  const TrainResult& m = c.measured;
  std::ostringstream o;
  o << "\nPlan " << c.plan_path << ": " << c.plan.strategy;
  if (c.plan.budget_bytes > 0) o << ", budget " << FormatBytes(c.plan.budget_bytes);
  o << "; profile " << c.plan.profile.source
    << (c.plan.profile.device.empty() ? "" : " (" + c.plan.profile.device + ")") << "; ran "
    << m.steps.size() << " steps on " << m.device;
  if (c.memory_limit_bytes > 0) o << " under a " << FormatBytes(c.memory_limit_bytes) << " limit";
  if (m.provenance.present()) o << "\nMeasured with " << DescribeProvenance(m.provenance);
  o << "\n\n";
  o << "                 " << Pad("predicted", 18) << Pad("measured", 18) << "difference\n";
  o << "  peak memory    " << Pad(FormatBytes(p.peak_bytes), 18)
    << Pad(FormatBytes(m.peak_bytes), 18) << Fixed(PercentOf(m.peak_bytes, p.peak_bytes), "%+.2f%%")
    << " (" << SignedBytes(m.peak_bytes - p.peak_bytes) << ")\n";
  o << "  model state    " << Pad(FormatBytes(p.static_bytes), 18)
    << Pad(FormatBytes(m.model_state_bytes), 18)
    << SignedBytes(m.model_state_bytes - p.static_bytes) << "\n";
  o << "  step time      " << Pad(FormatMillis(p.step_ms), 18) << Pad(FormatMillis(m.step_ms), 18)
    << "x" << Fixed(Ratio(m.step_ms, p.step_ms), "%.3f") << " (median of steps 2..)\n";
  o << "  recompute      " << Pad(FormatMillis(p.recompute_ms), 18)
    << Pad(FormatMillis(m.recompute_ms), 18);
  if (p.recompute_ms > 0) o << "x" << Fixed(Ratio(m.recompute_ms, p.recompute_ms), "%.3f");
  o << "\n";
  if (p.host_peak_bytes > 0 || m.host_peak_bytes > 0) {
    o << "  host memory    " << Pad(FormatBytes(p.host_peak_bytes), 18)
      << Pad(FormatBytes(m.host_peak_bytes), 18)
      << SignedBytes(m.host_peak_bytes - p.host_peak_bytes) << " (activation offload, peak)\n";
  }
  if (m.reserved_peak_bytes > 0) {
    o << "  reserved       " << Pad("-", 18) << Pad(FormatBytes(m.reserved_peak_bytes), 18)
      << "(CUDA caching allocator)\n";
  }
  o << "  peak at        predicted " << OpLabel(c, p.peak_op) << "; measured "
    << OpLabel(c, MeasuredPeakOp(m)) << "\n";

  // Per-op differences, largest first (the last step's measurement).
  const size_t n = std::min(p.timeline.size(), m.ops.size());
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  auto memory_delta = [&](size_t i) { return m.ops[i].peak - p.timeline[i].peak; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::llabs(memory_delta(a)) > std::llabs(memory_delta(b));
  });
  o << "\nWhere the difference comes from (per schedule op, measured - predicted):\n";
  o << "  peak memory during the op (compute ops)\n";
  int shown = 0;
  for (size_t k = 0; k < n && shown < 5; ++k) {
    const size_t i = order[k];
    if (memory_delta(i) == 0) break;
    if (c.plan.schedule.ops[i].kind == OpKind::kFree) continue;
    o << "    " << Pad(OpLabel(c, static_cast<int>(i)), 38) << Pad(SignedBytes(memory_delta(i)), 12)
      << "predicted " << Pad(FormatBytes(p.timeline[i].peak), 12) << "measured "
      << FormatBytes(m.ops[i].peak) << "\n";
    ++shown;
  }
  if (shown == 0) o << "    every op's peak matches the prediction to the byte\n";
  auto time_delta = [&](size_t i) { return m.ops[i].ms - PredictedMs(p.timeline[i]); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::fabs(time_delta(a)) > std::fabs(time_delta(b));
  });
  o << "  time of the op\n";
  for (size_t k = 0; k < n && k < 5; ++k) {
    const size_t i = order[k];
    o << "    " << Pad(OpLabel(c, static_cast<int>(i)), 38)
      << Pad(Fixed(time_delta(i), "%+.2f ms"), 12) << "predicted "
      << Pad(FormatMillis(PredictedMs(p.timeline[i])), 12) << "measured "
      << FormatMillis(m.ops[i].ms) << "\n";
  }
  return o.str();
}

std::string TrainReportJson(const TrainComparison& c) {
  const SimulationResult& p = c.predicted;
  const TrainResult& m = c.measured;
  nlohmann::ordered_json j;
  j["plan"] = {{"path", c.plan_path},
               {"strategy", c.plan.strategy},
               {"budget_bytes", c.plan.budget_bytes},
               {"profile_source", c.plan.profile.source},
               {"profile_device", c.plan.profile.device}};
  j["device"] = m.device;
  if (m.provenance.present()) j["provenance"] = ProvenanceJson(m.provenance);
  j["memory_limit_bytes"] = c.memory_limit_bytes;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const StepRecord& s : m.steps) {
    steps.push_back({{"step", s.step},
                     {"loss", s.loss},
                     {"peak_bytes", s.peak_bytes},
                     {"step_ms", s.step_ms},
                     {"recompute_ms", s.recompute_ms}});
  }
  j["steps"] = steps;
  j["predicted"] = {{"peak_bytes", p.peak_bytes},
                    {"peak_op", p.peak_op},
                    {"static_bytes", p.static_bytes},
                    {"step_ms", p.step_ms},
                    {"recompute_ms", p.recompute_ms}};
  // Activation offload (0 without): the host memory and the copies' time.
  j["predicted"]["host_peak_bytes"] = p.host_peak_bytes;
  j["predicted"]["transfer_ms"] = p.transfer_ms;
  j["measured"] = {{"peak_bytes", m.peak_bytes},
                   {"peak_op", MeasuredPeakOp(m)},
                   {"model_state_bytes", m.model_state_bytes},
                   {"reserved_peak_bytes", m.reserved_peak_bytes},
                   {"host_peak_bytes", m.host_peak_bytes},
                   {"step_ms", m.step_ms},
                   {"recompute_ms", m.recompute_ms}};
  j["difference"] = {{"peak_bytes", m.peak_bytes - p.peak_bytes},
                     {"peak_percent", PercentOf(m.peak_bytes, p.peak_bytes)},
                     {"step_time_ratio", Ratio(m.step_ms, p.step_ms)},
                     {"recompute_time_ratio", Ratio(m.recompute_ms, p.recompute_ms)}};
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  const size_t n = std::min(p.timeline.size(), m.ops.size());
  for (size_t i = 0; i < n; ++i) {
    ops.push_back({{"index", i},
                   {"op", DescribeOp(c.plan.schedule.ops[i])},
                   {"predicted_peak", p.timeline[i].peak},
                   {"measured_peak", m.ops[i].peak},
                   {"predicted_live_after", p.timeline[i].live_after},
                   {"measured_live_after", m.ops[i].live_after},
                   {"predicted_ms", PredictedMs(p.timeline[i])},
                   {"measured_ms", m.ops[i].ms}});
  }
  j["ops"] = ops;
  return j.dump(2) + "\n";
}

}  // namespace remat
