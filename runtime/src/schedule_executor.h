// Executes a planner Schedule on a ChainModel, op by op, measuring each op.
//
// The executor holds the schedule's tensors: x[i] (activations between
// layers), a[i] (what a forward with grad keeps, as a SavedLayer) and g[i]
// (input gradients). kForward/kRecompute run a layer with or without grad or
// selectively; kBackward runs it backward; kFree drops a reference;
// kOptimizerStep updates the weights and sets the gradients to None (each
// layer's backward creates them again), or re-zeroes persistent buffers.
// A forward with grad that releases its input (InputReleasingOps: the loss
// under cross_entropy) runs on its producer's graph and the executor drops
// x[i] at once, as the simulator does. kOffload moves a checkpoint x[i] into
// the host pool (host_pool.h) and releases its device bytes; kPrefetch
// brings it back; a kFree of it releases its host bytes. Every op is
// sampled (time, bytes in use before/after and the peak during it), so the
// measured timeline lines up index for index with the simulator's.
#ifndef REMAT_RUNTIME_SRC_SCHEDULE_EXECUTOR_H_
#define REMAT_RUNTIME_SRC_SCHEDULE_EXECUTOR_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "chain_model.h"
#include "device.h"
#include "host_pool.h"
#include "layer_execution.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/schedule/runtime_api.h"
#include "remat/schedule/schedule.h"

namespace remat::runtime {

struct StepResult {
  double loss = 0;                  // the loss layer's output (first forward)
  double ms = 0;                    // all ops, device synchronized
  double recompute_ms = 0;          // recompute ops + attention cores recomputed in backward
  int64_t peak_bytes = 0;           // highest bytes in use during the step
  int64_t reserved_peak_bytes = 0;  // CUDA caching allocator reserve; 0 on CPU
  int64_t host_peak_bytes = 0;      // most offloaded bytes in the host pool at once
  int64_t host_left_bytes = 0;      // offloaded bytes the schedule left (released at the end)
  std::vector<OpSample> ops;        // one per schedule op
};

class ScheduleExecutor {
 public:
  // `optimizer` may be null: kOptimizerStep then does nothing (gradients stay
  // in .grad, for tests). All references must outlive the executor.
  ScheduleExecutor(const ChainModel& model, ModelOptimizer* optimizer, MemoryMeter& meter,
                   uint64_t seed, ClockKind clock = ClockKind::kWall);
  ScheduleExecutor(const ScheduleExecutor&) = delete;
  ScheduleExecutor& operator=(const ScheduleExecutor&) = delete;

  // OK if `schedule` fits the model's chain: same layer count, selective
  // ops only on blocks (the model's options), offloads only of x[1..L-1].
  static Status Check(const Schedule& schedule, const ChainModel& model);

  // Runs training step `step` (0-based; dropout seeds depend on it) on
  // `batch`, the chain's x[0] (ChainModel::MakeBatch), which the schedule
  // frees like any other tensor (pass it moved). An out-of-memory under the meter's
  // cap returns kOutOfMemory naming the op; other LibTorch errors kInternal.
  // Whatever the schedule leaves live is released at the end, also on error
  // (the host pool is empty after every step).
  //
  // Gradient accumulation: micro-batch `micro` (0-based) of `micro_batches`
  // per update. Its loss is divided by micro_batches before backward (the
  // loss layer's backward starts from 1/K), the gradients add into .grad in
  // place, and kOptimizerStep runs only for the last micro-batch (the
  // optimizer zeroes .grad after its step).
  Result<StepResult> RunStep(const Schedule& schedule, at::Tensor batch, int64_t step,
                             int64_t micro = 0, int64_t micro_batches = 1);

 private:
  void RunOp(const Op& op, bool release_input, int64_t step, bool last_micro_batch,
             double loss_scale, StepResult* result);
  void Offload(int i);
  const at::Tensor& Live(const at::Tensor& t, const char* kind, int index) const;
  void Clear();
  void KeepSkip(const Op& op, int i);
  std::vector<at::Tensor> LiveSkips() const;
  void ReleaseSkips(std::vector<at::Tensor> grads);

  const ChainModel& model_;
  ModelOptimizer* optimizer_;
  MemoryMeter& meter_;
  uint64_t seed_;
  Timing timing_;
  std::vector<at::Tensor> x_, g_;
  std::vector<char> released_;  // x[i] released by a forward that did not keep it
  std::vector<SavedLayer> a_;
  // Side outputs to the loss by layer (separate text passes) and their
  // gradients.
  std::vector<at::Tensor> skip_, skip_grad_;
  HostPool host_;  // offloaded checkpoints, by x index
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_SCHEDULE_EXECUTOR_H_
