// A Runtime that runs nothing: the CLI's train and measured-profile paths
// tested without LibTorch (ninja's fake CommandRunner is the model). It
// "measures" the analytic profile and "trains" by simulating the schedule on
// it, so its figures equal the prediction of a plan made from the same
// model.json; a memory limit below the simulated peak fails the way the
// real runtime does, at the first op past it.
#ifndef REMAT_TESTS_CLI_FAKE_RUNTIME_H_
#define REMAT_TESTS_CLI_FAKE_RUNTIME_H_

#include <cstdlib>
#include <string>

#include "remat/analytic/analytic.h"
#include "remat/schedule/runtime_api.h"
#include "remat/simulate/simulator.h"
#include "remat/io/units.h"

namespace remat::cli {

class FakeRuntime : public Runtime {
 public:
  std::string name() const override { return "fake"; }

  Result<Profile> Measure(const ModelConfig& config, const MeasureOptions& options) override {
    ++measure_calls;
    last_measure = options;
    REMAT_ASSIGN_OR_RETURN(Profile p, AnalyticProfile(config, AnalyticOptions{}));
    p.source = "fake";
    return p;
  }

  Result<TrainResult> Train(const ModelConfig& config, const Schedule& schedule,
                            const TrainOptions& options) override {
    ++train_calls;
    last_grad_accumulation = config.grad_accumulation;
    last_micro_batch = config.micro_batch;
    last_config = config;
    const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    last_alloc_conf = conf == nullptr ? "(unset)" : conf;
    REMAT_ASSIGN_OR_RETURN(const Profile p, AnalyticProfile(config, AnalyticOptions{}));
    REMAT_ASSIGN_OR_RETURN(const SimulationResult sim, Simulate(p, schedule));
    if (options.memory_limit_bytes > 0 && sim.peak_bytes > options.memory_limit_bytes) {
      return OutOfMemory(sim, schedule, options.memory_limit_bytes);
    }
    TrainResult r;
    r.device = options.device;
    for (int s = 1; s <= options.steps; ++s) {
      StepRecord step{s, 10.0 / s, sim.peak_bytes, sim.step_ms, sim.recompute_ms};
      if (options.on_step) options.on_step(step);
      r.steps.push_back(step);
    }
    for (const TimelinePoint& t : sim.timeline) {
      r.ops.push_back({t.op_index, t.end_ms - t.start_ms, t.live_before, t.peak, t.live_after});
    }
    r.peak_bytes = sim.peak_bytes;
    r.model_state_bytes = sim.static_bytes;
    r.step_ms = sim.step_ms;
    r.recompute_ms = sim.recompute_ms;
    return r;
  }

  int measure_calls = 0;
  int train_calls = 0;
  int64_t last_grad_accumulation = 0;  // of the last Train call
  int64_t last_micro_batch = 0;        // of the last Train call
  ModelConfig last_config;             // of the last Train call
  MeasureOptions last_measure;
  // PYTORCH_CUDA_ALLOC_CONF as the last Train call saw it ("(unset)").
  std::string last_alloc_conf;

 private:
  static Status OutOfMemory(const SimulationResult& sim, const Schedule& schedule, int64_t limit) {
    for (const TimelinePoint& t : sim.timeline) {
      if (t.peak <= limit) continue;
      return Status::OutOfMemory(
          "out of memory at step 1, schedule op " + std::to_string(t.op_index) + " (" +
          DescribeOp(schedule.ops[t.op_index]) + "): asked for " +
          FormatBytes(t.peak - t.live_before) + " with " + FormatBytes(t.live_before) +
          " in use; the limit is " + FormatBytes(limit));
    }
    return Status::Internal("fake runtime: peak above the limit but no op reaches it");
  }
};

}  // namespace remat::cli

#endif  // REMAT_TESTS_CLI_FAKE_RUNTIME_H_
