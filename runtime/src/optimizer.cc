#include "optimizer.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

namespace remat::runtime {
namespace {

constexpr int64_t kChunk = int64_t{1} << 16;  // elements per temporary

}  // namespace

ModelOptimizer::ModelOptimizer(Optimizer kind, std::vector<at::Tensor> params,
                               const OptimizerSettings& settings)
    : kind_(kind), settings_(settings), params_(std::move(params)) {
  c10::NoGradGuard no_grad;
  for (const at::Tensor& p : params_) {
    if (kind_ == Optimizer::kAdamW) {
      first_.push_back(at::zeros_like(p));
      second_.push_back(at::zeros_like(p));
    } else if (kind_ == Optimizer::kSgdMomentum) {
      first_.push_back(at::zeros_like(p));
    }
  }
}

void ModelOptimizer::Step() {
  c10::NoGradGuard no_grad;
  ++steps_;
  const OptimizerSettings& s = settings_;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor p = params_[i];
    at::Tensor g = p.mutable_grad();
    if (!g.defined()) continue;  // no gradient this step (torch.optim skips it too)
    switch (kind_) {
      case Optimizer::kAdamW: {
        const double bc1 = 1 - std::pow(s.beta1, static_cast<double>(steps_));
        const double bc2 = 1 - std::pow(s.beta2, static_cast<double>(steps_));
        at::Tensor m = first_[i], v = second_[i];
        p.mul_(1 - s.lr * s.weight_decay);
        m.mul_(s.beta1).add_(g, 1 - s.beta1);
        v.mul_(s.beta2).addcmul_(g, g, 1 - s.beta2);
        // p -= lr / bc1 * m / (sqrt(v / bc2) + eps), chunk by chunk.
        const at::Tensor pf = p.view(-1), mf = m.view(-1), vf = v.view(-1);
        const int64_t n = pf.numel();
        for (int64_t off = 0; off < n; off += kChunk) {
          const int64_t len = std::min(kChunk, n - off);
          at::Tensor denom = vf.narrow(0, off, len).sqrt();
          denom.div_(std::sqrt(bc2)).add_(s.eps);
          pf.narrow(0, off, len).addcdiv_(mf.narrow(0, off, len), denom, -s.lr / bc1);
        }
        break;
      }
      case Optimizer::kSgdMomentum:
        first_[i].mul_(s.momentum).add_(g);
        p.add_(first_[i], -10 * s.lr);
        break;
      case Optimizer::kSgd:
        p.add_(g, -10 * s.lr);
        break;
      case Optimizer::kNone:
        break;
    }
    p.mutable_grad().reset();  // zero_grad(set_to_none=True), PyTorch 2.x's default
  }
}

}  // namespace remat::runtime
