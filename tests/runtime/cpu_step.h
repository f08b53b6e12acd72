// One step of a schedule on a fresh CPU model, metered by the CPU meter:
// what the runtime tests compare against the simulator op by op.
#ifndef REMAT_TESTS_RUNTIME_CPU_STEP_H_
#define REMAT_TESTS_RUNTIME_CPU_STEP_H_

#include <ATen/ATen.h>

#include <memory>

#include "chain_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/model_config.h"
#include "remat/schedule.h"
#include "schedule_executor.h"

namespace remat::testing {

// Step 0 of `s` on `c`'s model (seed 3, AdamW) with batch 0.
inline Result<runtime::StepResult> RunStepOnCpu(const ModelConfig& c, const Schedule& s) {
  std::unique_ptr<runtime::ChainModel> model = runtime::MakeChainModel(c, at::Device(at::kCPU), 3);
  runtime::ModelOptimizer optimizer(Optimizer::kAdamW, model->parameters());
  runtime::ScheduleExecutor executor(*model, &optimizer, runtime::CpuMeter(), 3);
  return executor.RunStep(s, model->MakeBatch(3, 0), 0);
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_CPU_STEP_H_
