// The optimizer step, with its state allocated up front, and what a training
// loop does once per update around it: the dynamic loss scaler's unscaling
// (amp_fp16), clipping by the global gradient norm, the learning-rate
// schedule.
//
// torch::optim creates its state lazily inside the first step; the
// planner's model treats optimizer state as live for the whole run, so
// AdamW's two moment buffers (or SGD's momentum buffer) are allocated in
// the constructor. The update is torch.optim's (PyTorch 2.11), with its
// temporaries, which the planner models (analytic/optimizer_step.h): AdamW
// computes each parameter's denominator sqrt(v / (1 - beta2^t)) + eps as a
// new tensor, per parameter on the CPU (_single_tensor_adam: the previous
// parameter's lives until the next is made) and all at once on CUDA
// (_multi_tensor_adam, foreach); SGD, with or without momentum, updates in
// place. With master weights (mixed_*, the fused optimizers of Megatron and
// DeepSpeed) AdamW runs in place over 64 Ki-element chunks.
//
// Mixed precision (mixed_bf16, mixed_fp16; the Megatron / DeepSpeed
// convention): the model's weights are 16-bit; the optimizer keeps an fp32
// master copy of each, allocated in the constructor with fp32 moments, and
// updates the master weights from the gradients (fp32, or 16-bit with
// grad_dtype), then copies them into the 16-bit weights, chunk by chunk.
//
// Once per update, in this order (as transformers' Trainer with
// torch.amp.GradScaler):
//   1. loss scaler: the gradients are multiplied by 1/scale; any inf or nan
//      skips the update (gradients set to None, schedule not advanced) and halves
//      the scale; 2000 clean updates in a row double it;
//   2. clipping (max_grad_norm > 0), as torch.nn.utils.clip_grad_norm_: the
//      L2 norm of every gradient, the norm of those norms, and every gradient
//      multiplied by min(1, max_grad_norm / (norm + 1e-6)). Its transients
//      are one scalar per parameter tensor and their stack (bytes, not
//      megabytes); its time is one read of the gradients and one in-place
//      multiply, which the measured optimizer step includes;
//   3. the update at lr x the schedule's factor for this update;
//   4. the gradients set to None (zero_grad(set_to_none=True); a persistent
//      convention's buffers are allocated again by the caller), the
//      schedule advanced.
#ifndef REMAT_RUNTIME_SRC_OPTIMIZER_H_
#define REMAT_RUNTIME_SRC_OPTIMIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "remat/model/model_config.h"

namespace remat::runtime {

struct OptimizerSettings {
  double lr = 1e-3;  // AdamW; SGD uses 10x this
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // AdamW only (decoupled)
  double momentum = 0.9;       // sgd_momentum only
  double max_grad_norm = 0;    // 0: no clipping
  LrSchedule lr_schedule = LrSchedule::kConstant;
  int64_t warmup_steps = 0;
  int64_t total_updates = 0;       // where linear and cosine reach 0; 0: no decay
  bool loss_scaler = false;        // dynamic loss scaling (amp_fp16, mixed_fp16)
  bool master_weights = false;     // fp32 master weights and moments (mixed_*)
  double initial_scale = 65536.0;  // torch.amp.GradScaler's defaults
  int64_t growth_interval = 2000;
};

// The settings of `config`'s training loop, over a run of `total_updates`.
OptimizerSettings SettingsFor(const ModelConfig& config, int64_t total_updates);

// The learning-rate factor of update `update` (0-based), as transformers'
// get_{constant,linear,cosine}_schedule_with_warmup: update / warmup during
// the warmup, then 1 (constant), a linear decay to 0 at `total`, or half a
// cosine to 0 at `total` (total 0: no decay).
double LrFactor(LrSchedule schedule, int64_t warmup, int64_t total, int64_t update);

class ModelOptimizer {
 public:
  // Allocates the state for `params` in their dtype, as torch.optim does.
  ModelOptimizer(Optimizer kind, std::vector<at::Tensor> params,
                 const OptimizerSettings& settings = {});
  ModelOptimizer(const ModelOptimizer&) = delete;
  ModelOptimizer& operator=(const ModelOptimizer&) = delete;

  // One update (see the top of this file), then sets the gradients to None
  // (zero_grad(set_to_none=True); persistent buffers are allocated again by
  // the caller).
  void Step();

  // The learning rate the next Step applies.
  double lr() const;
  // The fp32 master weights (settings.master_weights), one per parameter;
  // empty without them.
  const std::vector<at::Tensor>& master_weights() const { return masters_; }
  // Updates applied (skipped ones not counted).
  int64_t updates() const { return updates_; }
  // What backward multiplies the loss by: the loss scale (1 without a scaler).
  double loss_scale() const { return scale_; }
  // The last Step's gradient norm before clipping (0 without clipping), and
  // whether it clipped or skipped.
  double last_grad_norm() const { return last_norm_; }
  bool last_clipped() const { return last_clipped_; }
  bool last_skipped() const { return last_skipped_; }

 private:
  bool Unscale();  // false: a gradient is not finite
  void Clip();
  void Update(double lr);
  // AdamW on the weights themselves, as torch.optim.AdamW's default
  // implementation for their device.
  void TorchAdamW(double lr);
  void ZeroGrads();

  Optimizer kind_;
  OptimizerSettings settings_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> first_, second_;  // AdamW moments; first_ = SGD momentum
  std::vector<at::Tensor> masters_;         // fp32 master weights (master_weights)
  int64_t updates_ = 0;                     // also AdamW's bias-correction step
  double scale_ = 1.0;
  int64_t clean_updates_ = 0;
  double last_norm_ = 0;
  bool last_clipped_ = false, last_skipped_ = false;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_OPTIMIZER_H_
