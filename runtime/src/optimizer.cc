#include "optimizer.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "remat/model/precision.h"

namespace remat::runtime {
namespace {

constexpr int64_t kChunk = int64_t{1} << 16;  // elements per temporary
constexpr double kPi = 3.14159265358979323846;

}  // namespace

OptimizerSettings SettingsFor(const ModelConfig& config, int64_t total_updates) {
  OptimizerSettings s;
  s.max_grad_norm = config.max_grad_norm;
  s.lr_schedule = config.lr_schedule;
  s.warmup_steps = config.warmup_steps;
  s.total_updates = total_updates;
  s.loss_scaler = ConventionOf(config.precision).loss_scaler;
  s.master_weights = ConventionOf(config.precision).master_weight_bytes > 0;
  return s;
}

double LrFactor(LrSchedule schedule, int64_t warmup, int64_t total, int64_t update) {
  if (update < warmup) return static_cast<double>(update) / static_cast<double>(warmup);
  if (schedule == LrSchedule::kConstant || total <= 0) return 1.0;
  const double progress = static_cast<double>(update - warmup) /
                          static_cast<double>(std::max<int64_t>(1, total - warmup));
  if (schedule == LrSchedule::kLinear) return std::max(0.0, 1.0 - progress);
  return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * progress)));
}

ModelOptimizer::ModelOptimizer(Optimizer kind, std::vector<at::Tensor> params,
                               const OptimizerSettings& settings)
    : kind_(kind), settings_(settings), params_(std::move(params)) {
  c10::NoGradGuard no_grad;
  if (settings_.loss_scaler) scale_ = settings_.initial_scale;
  for (const at::Tensor& p : params_) {
    // The state's dtype: the master weights' (fp32) with them, else the
    // parameter's, as torch.optim.
    const at::Tensor& like = settings_.master_weights
                                 ? masters_.emplace_back(p.to(at::kFloat, /*non_blocking=*/false,
                                                              /*copy=*/true))
                                 : p;
    if (kind_ == Optimizer::kAdamW) {
      first_.push_back(at::zeros_like(like));
      second_.push_back(at::zeros_like(like));
    } else if (kind_ == Optimizer::kSgdMomentum) {
      first_.push_back(at::zeros_like(like));
    }
  }
}

double ModelOptimizer::lr() const {
  return settings_.lr *
         LrFactor(settings_.lr_schedule, settings_.warmup_steps, settings_.total_updates, updates_);
}

void ModelOptimizer::Step() {
  c10::NoGradGuard no_grad;
  last_norm_ = 0;
  last_clipped_ = last_skipped_ = false;
  if (settings_.loss_scaler && !Unscale()) {
    // GradScaler: skip the update, back off the scale.
    last_skipped_ = true;
    scale_ *= 0.5;
    clean_updates_ = 0;
    ZeroGrads();
    return;
  }
  if (settings_.loss_scaler && ++clean_updates_ == settings_.growth_interval) {
    scale_ *= 2.0;
    clean_updates_ = 0;
  }
  if (settings_.max_grad_norm > 0) Clip();
  const double rate = lr();
  ++updates_;
  Update(rate);
  ZeroGrads();
}

bool ModelOptimizer::Unscale() {
  // GradScaler's fused unscale: in place, no gradient-sized temporaries.
  std::vector<at::Tensor> grads;
  grads.reserve(params_.size());
  for (const at::Tensor& p : params_) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return true;
  const auto options = at::TensorOptions().dtype(at::kFloat).device(grads.front().device());
  at::Tensor found_inf = at::zeros({1}, options);
  const at::Tensor inverse = at::full({1}, 1.0 / scale_, options);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inverse);
  return found_inf.item<double>() == 0;
}

void ModelOptimizer::Clip() {
  // torch.nn.utils.clip_grad_norm_: the norms in the gradients' dtype, their
  // norm, and a multiply by the clamped coefficient whether or not it clips.
  std::vector<at::Tensor> norms;
  norms.reserve(params_.size());
  for (const at::Tensor& p : params_) {
    if (p.grad().defined()) norms.push_back(at::linalg_vector_norm(p.grad(), 2));
  }
  if (norms.empty()) return;
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2).to(at::kFloat);
  const at::Tensor coefficient =
      at::reciprocal(total + 1e-6).mul_(settings_.max_grad_norm).clamp_max_(1.0);
  for (const at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().mul_(coefficient);
  }
  last_norm_ = total.item<double>();
  last_clipped_ = last_norm_ + 1e-6 > settings_.max_grad_norm;
}

void ModelOptimizer::Update(double lr) {
  if (kind_ == Optimizer::kAdamW && !settings_.master_weights) {
    TorchAdamW(lr);
    return;
  }
  const OptimizerSettings& s = settings_;
  for (size_t i = 0; i < params_.size(); ++i) {
    // With master weights the update goes to the fp32 copy, then back.
    at::Tensor p = settings_.master_weights ? masters_[i] : params_[i];
    at::Tensor g = params_[i].mutable_grad();
    if (!g.defined()) continue;  // no gradient this step (torch.optim skips it too)
    switch (kind_) {
      case Optimizer::kAdamW: {
        const double bc1 = 1 - std::pow(s.beta1, static_cast<double>(updates_));
        const double bc2 = 1 - std::pow(s.beta2, static_cast<double>(updates_));
        // Chunk by chunk, so that the temporaries (the denominator; with
        // master weights the fp32 copy of a 16-bit gradient chunk that the
        // mixed-dtype arithmetic makes) stay one chunk:
        //   p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
        //   p -= lr / bc1 * m / (sqrt(v / bc2) + eps)
        const at::Tensor pf = p.view(-1), mf = first_[i].view(-1), vf = second_[i].view(-1);
        const at::Tensor gf = g.reshape(-1);
        const int64_t n = pf.numel();
        for (int64_t off = 0; off < n; off += kChunk) {
          const int64_t len = std::min(kChunk, n - off);
          at::Tensor pc = pf.narrow(0, off, len), mc = mf.narrow(0, off, len);
          at::Tensor vc = vf.narrow(0, off, len);
          const at::Tensor gc = gf.narrow(0, off, len);
          pc.mul_(1 - lr * s.weight_decay);
          mc.mul_(s.beta1).add_(gc, 1 - s.beta1);
          vc.mul_(s.beta2).addcmul_(gc, gc, 1 - s.beta2);
          at::Tensor denom = vc.sqrt();
          denom.div_(std::sqrt(bc2)).add_(s.eps);
          pc.addcdiv_(mc, denom, -lr / bc1);
        }
        break;
      }
      case Optimizer::kSgdMomentum:
        first_[i].mul_(s.momentum).add_(g);
        p.add_(first_[i], -10 * lr);
        break;
      case Optimizer::kSgd:
        p.add_(g, -10 * lr);
        break;
      case Optimizer::kNone:
      case Optimizer::kAdafactor:  // refused before a model is built (DeviceRuns)
      case Optimizer::kMuon:
      case Optimizer::kAdamW8bit:
      case Optimizer::kPagedAdamW8bit:
      case Optimizer::kTorchaoAdamW8bit:
      case Optimizer::kTorchaoAdamW4bit:
      case Optimizer::kTorchaoAdamWFp8:
        break;
    }
    if (settings_.master_weights) {
      // The 16-bit weights from the master weights, chunk by chunk.
      const at::Tensor to = params_[i].view(-1), from = p.view(-1);
      for (int64_t off = 0; off < to.numel(); off += kChunk) {
        const int64_t len = std::min(kChunk, to.numel() - off);
        to.narrow(0, off, len).copy_(from.narrow(0, off, len));
      }
    }
  }
}

void ModelOptimizer::TorchAdamW(double lr) {
  const OptimizerSettings& s = settings_;
  const double step = static_cast<double>(updates_);
  const double bc2_sqrt = std::sqrt(1 - std::pow(s.beta2, step));
  const double step_size = lr / (1 - std::pow(s.beta1, step));
  std::vector<at::Tensor> params, grads, first, second;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;  // torch.optim skips it too
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
    first.push_back(first_[i]);
    second.push_back(second_[i]);
  }
  if (params.empty()) return;
  if (params.front().is_cuda()) {
    // _multi_tensor_adam: every denominator at once.
    at::_foreach_mul_(params, 1 - lr * s.weight_decay);
    at::_foreach_lerp_(first, grads, 1 - s.beta1);
    at::_foreach_mul_(second, s.beta2);
    at::_foreach_addcmul_(second, grads, grads, 1 - s.beta2);
    std::vector<at::Tensor> denom = at::_foreach_sqrt(second);
    at::_foreach_div_(denom, bc2_sqrt);
    at::_foreach_add_(denom, s.eps);
    at::_foreach_addcdiv_(params, first, denom, -step_size);
    return;
  }
  // _single_tensor_adam: the previous parameter's denominator, the loop's
  // variable, lives until the next one is assigned.
  at::Tensor denom;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].mul_(1 - lr * s.weight_decay);
    first[i].lerp_(grads[i], 1 - s.beta1);
    second[i].mul_(s.beta2).addcmul_(grads[i], grads[i], 1 - s.beta2);
    denom = (second[i].sqrt() / bc2_sqrt).add_(s.eps);
    params[i].addcdiv_(first[i], denom, -step_size);
  }
}

void ModelOptimizer::ZeroGrads() {
  // zero_grad(set_to_none=True), PyTorch 2.x's default.
  for (const at::Tensor& p : params_) p.mutable_grad().reset();
}

}  // namespace remat::runtime
