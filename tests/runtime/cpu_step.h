// One step of a schedule on a fresh CPU model, metered by the CPU meter:
// what the runtime tests compare against the simulator op by op.
#ifndef REMAT_TESTS_RUNTIME_CPU_STEP_H_
#define REMAT_TESTS_RUNTIME_CPU_STEP_H_

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "chain_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"
#include "schedule_executor.h"

namespace remat::testing {

// Step 0 of `s` on `c`'s model (seed 3, AdamW) with batch 0.
inline Result<runtime::StepResult> RunStepOnCpu(const ModelConfig& c, const Schedule& s) {
  std::unique_ptr<runtime::ChainModel> model = runtime::MakeChainModel(c, at::Device(at::kCPU), 3);
  runtime::ModelOptimizer optimizer(Optimizer::kAdamW, model->parameters());
  runtime::ScheduleExecutor executor(*model, &optimizer, runtime::CpuMeter(), 3);
  return executor.RunStep(s, model->MakeBatch(3, 0), 0);
}

// `s` simulated against `p` and run on `c`'s model, each from its first
// op's live bytes.
struct SimulatedAndRun {
  SimulationResult sim;
  runtime::StepResult run;
  int64_t simulated_base = 0;
  int64_t measured_base = 0;
};

// False (with a test failure) where either fails or their ops differ in
// number.
inline bool SimulateAndRunOnCpu(const ModelConfig& c, const Profile& p, const Schedule& s,
                                SimulatedAndRun* out) {
  Result<SimulationResult> sim = Simulate(p, s);
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  Result<runtime::StepResult> r = RunStepOnCpu(c, s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!sim.ok() || !r.ok()) return false;
  EXPECT_EQ(r->ops.size(), sim->timeline.size());
  if (r->ops.size() != sim->timeline.size() || r->ops.empty()) return false;
  out->sim = std::move(*sim);
  out->run = std::move(*r);
  out->simulated_base = out->sim.timeline[0].live_before;
  out->measured_base = out->run.ops[0].live_before;
  return true;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_CPU_STEP_H_
