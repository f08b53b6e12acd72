#include "norm_recompute.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

namespace remat::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The arguments after x and the weights, each a non-tensor input of the
// function: its gradient is undefined.
constexpr size_t kOtherArguments = 7;

at::Tensor Leaf(const at::Tensor& t) {
  return t.defined() ? t.detach().requires_grad_(t.requires_grad()) : t;
}

// The norm made again from leaves of its input and weights, with grad, so
// that its backward is autograd's own.
struct Remade {
  at::Tensor x, w, b;  // the leaves (b undefined: no bias)
  at::Tensor y;        // the norm's output
};

Remade Remake(NormKind kind, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
              double eps, RecomputeTimer* timer) {
  c10::AutoGradMode grad_mode(true);
  const DeviceClock clock(timer != nullptr ? timer->timing : Timing{});
  Remade r{x, w, b, ApplyNorm(kind, x, w, b, eps)};
  if (timer != nullptr) timer->ms += clock.ElapsedMs();
  return r;
}

struct NormLinears : torch::autograd::Function<NormLinears> {
  // `weights`: the norm's weight (and bias when `norm_bias`), then each
  // projection's weight (and bias when `bias`). A custom function's tensor
  // inputs must all be defined, hence the flags.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList weights,
                               int64_t kind, double eps, bool norm_bias, bool bias,
                               int64_t projections, RecomputeTimer* timer, bool with_norm) {
    // Autograd is off here; autocast is not: the norm and the projections
    // run in the dtypes the plain ops would, and the norm's output dies on
    // return.
    const size_t first = norm_bias ? 2 : 1, step = bias ? 2 : 1;
    const at::Tensor y = ApplyNorm(static_cast<NormKind>(kind), x, weights[0],
                                   norm_bias ? weights[1] : at::Tensor(), eps);
    variable_list out;
    for (int64_t i = 0; i < projections; ++i) {
      const size_t w = first + i * step;
      out.push_back(at::linear(y, weights[w], bias ? weights[w + 1] : at::Tensor()));
    }
    if (with_norm) out.push_back(y);
    variable_list saved = {x};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["norm_bias"] = norm_bias;
    ctx->saved_data["bias"] = bias;
    ctx->saved_data["timer"] = reinterpret_cast<int64_t>(timer);
    ctx->saved_data["projections"] = projections;
    Remade* stash = nullptr;
    if (timer != nullptr && timer->replay != nullptr) {
      stash = timer->replay->NewStash<Remade>();
      timer->replay->Add([stash, kind, eps, timer, x = Leaf(x), w = Leaf(weights[0]),
                          b = norm_bias ? Leaf(weights[1]) : at::Tensor()] {
        *stash = Remake(static_cast<NormKind>(kind), x, w, b, eps, timer);
      });
    }
    ctx->saved_data["stash"] = reinterpret_cast<int64_t>(stash);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const bool norm_bias = ctx->saved_data["norm_bias"].toBool();
    const bool bias = ctx->saved_data["bias"].toBool();
    auto* timer = reinterpret_cast<RecomputeTimer*>(ctx->saved_data["timer"].toInt());
    const size_t first = 1 + (norm_bias ? 2 : 1), step = bias ? 2 : 1;
    variable_list grads(saved.size() + kOtherArguments);
    // The recompute the layer's backward ran at its start, or else one now.
    auto* stash = reinterpret_cast<Remade*>(ctx->saved_data["stash"].toInt());
    Remade remade = stash != nullptr && stash->y.defined()
                        ? std::move(*stash)
                        : Remake(static_cast<NormKind>(ctx->saved_data["kind"].toInt()),
                                 Leaf(saved[0]), Leaf(saved[1]),
                                 norm_bias ? Leaf(saved[2]) : at::Tensor(),
                                 ctx->saved_data["eps"].toDouble(), timer);
    if (stash != nullptr) *stash = Remade();
    const at::Tensor x = std::move(remade.x), w = std::move(remade.w), b = std::move(remade.b);
    const at::Tensor y = std::move(remade.y);
    c10::AutoGradMode grad_mode(true);
    // Each projection's backward in the dtype it ran in (its output
    // gradient's: autocast's 16-bit copies under amp), gradients cast to
    // the weights' dtype; the norm output's gradient summed over them.
    at::Tensor dy_sum;
    const auto projections = static_cast<size_t>(ctx->saved_data["projections"].toInt());
    for (size_t i = 0; i < projections; ++i) {
      const at::Tensor& dy = grad_outputs[i];
      if (!dy.defined()) continue;
      const size_t k = first + i * step;
      const at::Tensor& weight = saved[k];
      const at::Tensor dy2 = dy.reshape({-1, dy.size(-1)});
      if (weight.requires_grad()) {
        const at::Tensor yc = y.detach().to(dy.scalar_type());
        grads[k] = dy2.t().mm(yc.reshape({-1, yc.size(-1)})).to(weight.scalar_type());
      }
      if (bias && saved[k + 1].requires_grad()) {
        grads[k + 1] = dy2.sum(0).to(saved[k + 1].scalar_type());
      }
      if (!y.requires_grad()) continue;
      at::Tensor d = dy.matmul(weight.to(dy.scalar_type()));
      if (dy_sum.defined()) {
        dy_sum.add_(d);
      } else {
        dy_sum = std::move(d);
      }
    }
    if (grad_outputs.size() > projections && grad_outputs.back().defined() && y.requires_grad()) {
      // The norm's own output gradient (the residual's), in its dtype, the
      // projections' added into it in place, as autograd's input buffer
      // accumulates them (it is this node's alone: the residual's other
      // reader, the MLP, has run its backward before this one).
      at::Tensor total = grad_outputs.back();
      if (dy_sum.defined()) total.add_(dy_sum.to(y.scalar_type()));
      dy_sum = std::move(total);
    }
    variable_list inputs;
    std::vector<size_t> index;
    for (size_t k = 0; k < first; ++k) {
      const at::Tensor& leaf = k == 0 ? x : (k == 1 ? w : b);
      if (!leaf.requires_grad()) continue;
      inputs.push_back(leaf);
      index.push_back(k);
    }
    if (dy_sum.defined() && !inputs.empty()) {
      variable_list d = torch::autograd::grad({y}, inputs, {dy_sum.to(y.scalar_type())},
                                              /*retain_graph=*/false, /*create_graph=*/false,
                                              /*allow_unused=*/true);
      for (size_t j = 0; j < d.size(); ++j) grads[index[j]] = d[j];
    }
    return grads;
  }
};

}  // namespace

at::Tensor ApplyNorm(NormKind kind, const at::Tensor& x, const at::Tensor& weight,
                     const at::Tensor& bias, double eps) {
  if (kind == NormKind::kLayerNorm) return at::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  // Keeps x in fp32 (x itself in fp32), the fp32 rsqrt per row and the
  // normalized x in x's dtype (Gemma's: in fp32, and 1 + weight in fp32).
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor rstd = at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (kind == NormKind::kGemmaRmsNorm) {
    return ((x32 * rstd) * (weight.to(at::kFloat) + 1.0)).to(x.scalar_type());
  }
  return weight * (x32 * rstd).to(x.scalar_type());
}

std::vector<at::Tensor> RecomputedNormLinears(NormKind kind, const at::Tensor& x,
                                              const at::Tensor& norm_weight,
                                              const at::Tensor& norm_bias, double eps,
                                              const std::vector<NormProjection>& projections,
                                              RecomputeTimer* timer, bool with_norm) {
  std::vector<at::Tensor> weights = {norm_weight};
  if (norm_bias.defined()) weights.push_back(norm_bias);
  const bool bias = projections.front().bias.defined();
  for (const NormProjection& p : projections) {
    weights.push_back(p.weight);
    if (bias) weights.push_back(p.bias);
  }
  return NormLinears::apply(x, at::TensorList(weights), static_cast<int64_t>(kind), eps,
                            norm_bias.defined(), bias, static_cast<int64_t>(projections.size()),
                            timer, with_norm);
}

}  // namespace remat::runtime
