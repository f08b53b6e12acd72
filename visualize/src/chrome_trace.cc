// RenderChromeTrace: the Trace Event Format (JSON object form) read by
// Perfetto and chrome://tracing. Times in microseconds, memory in bytes.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "palette.h"
#include "phases.h"
#include "remat/visualize.h"

namespace remat {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kPredictedPid = 1;
constexpr int kMeasuredPid = 2;
constexpr int kOpsTid = 1;
constexpr int kPhasesTid = 2;
constexpr int kFreesTid = 3;
constexpr MemoryCategory kStack[] = {MemoryCategory::kModelState, MemoryCategory::kParameterGrads,
                                     MemoryCategory::kActivations, MemoryCategory::kRecomputed,
                                     MemoryCategory::kGradients, MemoryCategory::kWorkspace};

double Micros(double ms) { return ms * 1000.0; }

Json Meta(const char* what, int pid, int tid, const std::string& name) {
  Json e = {{"name", what}, {"ph", "M"}, {"pid", pid}};
  if (tid >= 0) e["tid"] = tid;
  e["args"] = {{"name", name}};
  return e;
}

std::string OpName(const Op& op, const Profile& profile) {
  std::string s = DescribeOp(op);
  if (op.layer >= 0) s += " " + profile.layers[op.layer].name;
  return s;
}

Json Complete(const std::string& name, const char* cat, int pid, int tid, double start_ms,
              double dur_ms, Json args) {
  return {{"name", name},
          {"cat", cat},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", Micros(start_ms)},
          {"dur", Micros(dur_ms)},
          {"args", std::move(args)}};
}

Json Counter(const char* name, int pid, double ms, Json args) {
  return {{"name", name}, {"ph", "C"}, {"pid", pid}, {"ts", Micros(ms)}, {"args", std::move(args)}};
}

Json ByCategory(const MemoryByCategory& m) {
  Json args;
  for (MemoryCategory c : kStack) args[ToString(c)] = m[c];
  return args;
}

void AddPredicted(const ReportData& data, Json& events) {
  const Plan& plan = data.plans->chosen;
  const Profile& profile = *data.profile;
  events.push_back(
      Meta("process_name", kPredictedPid, -1,
           "predicted: " + profile.model + ", " + viz::PlanName(plan.strategy, plan.parameter)));
  events.push_back(Meta("thread_name", kPredictedPid, kOpsTid, "ops"));
  events.push_back(Meta("thread_name", kPredictedPid, kPhasesTid, "phases"));
  events.push_back(Meta("thread_name", kPredictedPid, kFreesTid, "frees"));
  for (const viz::PhaseRun& r : viz::PhaseRuns(plan)) {
    events.push_back(Complete(viz::PhaseLabel(r.kind), viz::PhaseLabel(r.kind), kPredictedPid,
                              kPhasesTid, r.start_ms, r.end_ms - r.start_ms, Json::object()));
  }
  const std::vector<TimelinePoint>& timeline = plan.predicted.timeline;
  for (size_t i = 0; i < timeline.size(); ++i) {
    const TimelinePoint& pt = timeline[i];
    const Op& op = plan.schedule.ops[i];
    if (!viz::Timed(pt)) {
      events.push_back({{"name", OpName(op, profile)},
                        {"cat", "free"},
                        {"ph", "i"},
                        {"s", "t"},
                        {"pid", kPredictedPid},
                        {"tid", kFreesTid},
                        {"ts", Micros(pt.start_ms)},
                        {"args", {{"op", i}, {"bytes_freed", pt.live_before - pt.live_after}}}});
      continue;
    }
    events.push_back(Complete(OpName(op, profile), viz::PhaseLabel(op.kind), kPredictedPid, kOpsTid,
                              pt.start_ms, pt.end_ms - pt.start_ms,
                              {{"op", i},
                               {"peak_bytes", pt.peak},
                               {"live_before_bytes", pt.live_before},
                               {"live_after_bytes", pt.live_after}}));
    events.push_back(Counter("memory", kPredictedPid, pt.start_ms, ByCategory(pt.at_peak)));
    events.push_back(Counter("memory total", kPredictedPid, pt.start_ms, {{"bytes", pt.peak}}));
  }
  if (!timeline.empty()) {  // what stays live after the step
    const TimelinePoint& last = timeline.back();
    events.push_back(
        Counter("memory total", kPredictedPid, last.end_ms, {{"bytes", last.live_after}}));
  }
}

void AddMeasured(const ReportData& data, Json& events) {
  const TrainResult& run = *data.measured;
  const Plan& plan = data.plans->chosen;
  events.push_back(Meta("process_name", kMeasuredPid, -1, "measured: " + run.device));
  events.push_back(Meta("thread_name", kMeasuredPid, kOpsTid, "ops"));
  std::vector<const OpSample*> samples;
  for (const OpSample& s : run.ops) samples.push_back(&s);
  std::stable_sort(samples.begin(), samples.end(),
                   [](const OpSample* a, const OpSample* b) { return a->op_index < b->op_index; });
  double t = 0;
  for (const OpSample* s : samples) {
    const Op& op = plan.schedule.ops[s->op_index];
    if (s->ms > 0 || op.kind != OpKind::kFree) {
      events.push_back(Complete(OpName(op, *data.profile), viz::PhaseLabel(op.kind), kMeasuredPid,
                                kOpsTid, t, s->ms,
                                {{"op", s->op_index},
                                 {"peak_bytes", s->peak},
                                 {"live_before_bytes", s->live_before},
                                 {"live_after_bytes", s->live_after}}));
    }
    events.push_back(Counter("memory total", kMeasuredPid, t, {{"bytes", s->peak}}));
    t += s->ms;
  }
}

}  // namespace

Result<std::string> RenderChromeTrace(const ReportData& data) {
  REMAT_RETURN_IF_ERROR(CheckReportData(data));
  const Plan& plan = data.plans->chosen;
  Json events = Json::array();
  AddPredicted(data, events);
  if (data.measured != nullptr) AddMeasured(data, events);
  Json doc;
  doc["displayTimeUnit"] = "ms";
  doc["otherData"] = {{"model", data.profile->model},
                      {"plan", viz::PlanName(plan.strategy, plan.parameter)},
                      {"strategy", ToString(plan.strategy)},
                      {"parameter", plan.parameter},
                      {"budget_bytes", plan.budget_bytes},
                      {"predicted_peak_bytes", plan.predicted.peak_bytes},
                      {"predicted_step_ms", plan.predicted.step_ms}};
  doc["traceEvents"] = std::move(events);
  return doc.dump() + "\n";
}

}  // namespace remat
