// The optimizer step, with its state allocated up front.
//
// torch::optim creates its state lazily inside the first step and builds
// parameter-sized temporaries in every step; the planner's model treats
// optimizer state as live for the whole run and the step as free of
// transients. This optimizer matches that: AdamW's two moment buffers (or
// SGD's momentum buffer) are allocated in the constructor, and the update
// runs in place, its temporaries bounded to one 64 Ki-element chunk.
#ifndef REMAT_RUNTIME_SRC_OPTIMIZER_H_
#define REMAT_RUNTIME_SRC_OPTIMIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "remat/model_config.h"

namespace remat::runtime {

struct OptimizerSettings {
  double lr = 1e-3;  // AdamW; SGD uses 10x this
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // AdamW only (decoupled)
  double momentum = 0.9;       // sgd_momentum only
};

class ModelOptimizer {
 public:
  // Allocates the state for `params` in their dtype, as torch.optim does.
  ModelOptimizer(Optimizer kind, std::vector<at::Tensor> params,
                 const OptimizerSettings& settings = {});
  ModelOptimizer(const ModelOptimizer&) = delete;
  ModelOptimizer& operator=(const ModelOptimizer&) = delete;

  // Updates the parameters from their gradients, then sets the gradients to
  // None (persistent buffers are allocated again by the caller).
  void Step();

 private:
  Optimizer kind_;
  OptimizerSettings settings_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> first_, second_;  // AdamW moments; first_ = SGD momentum
  int64_t steps_ = 0;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_OPTIMIZER_H_
