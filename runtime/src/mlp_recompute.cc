#include "mlp_recompute.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>

namespace remat::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor Activation(MlpActivation act, const at::Tensor& a, const at::Tensor& b) {
  switch (act) {
    case MlpActivation::kGelu:
      return at::gelu(a);
    case MlpActivation::kGeGlu:
      return at::gelu(a, "tanh") * b;
    case MlpActivation::kSwiGlu:
      break;
  }
  return at::silu(a) * b;
}

at::Tensor Leaf(const at::Tensor& t) {
  return t.defined() ? t.detach().requires_grad_(t.requires_grad()) : t;
}

// The activation made again from leaves of its inputs, with grad, so that
// its backward is autograd's own.
struct Remade {
  at::Tensor a, b;  // the leaves (b undefined: GELU)
  at::Tensor u;     // act(a[, b])
};

Remade Remake(MlpActivation act, const at::Tensor& a, const at::Tensor& b,
              RecomputeTimer* timer) {
  c10::AutoGradMode grad_mode(true);
  const DeviceClock clock(timer != nullptr ? timer->timing : Timing{});
  Remade r{a, b, Activation(act, a, b)};
  if (timer != nullptr) timer->ms += clock.ElapsedMs();
  return r;
}

struct ActivationLinear : torch::autograd::Function<ActivationLinear> {
  // `b` and `bias` may be absent (GELU; a projection without bias): a
  // custom function's tensor inputs must all be defined.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a,
                            const std::optional<at::Tensor>& b, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, int64_t act,
                            RecomputeTimer* timer) {
    // Autograd is off here; autocast is not: the linear runs in the dtype
    // the plain ops would, and the activation's output dies on return.
    const at::Tensor b_t = b.value_or(at::Tensor()), bias_t = bias.value_or(at::Tensor());
    const at::Tensor out =
        at::linear(Activation(static_cast<MlpActivation>(act), a, b_t), weight, bias_t);
    variable_list saved = {a, weight};
    if (b_t.defined()) saved.push_back(b_t);
    if (bias_t.defined()) saved.push_back(bias_t);
    ctx->save_for_backward(saved);
    ctx->saved_data["has_b"] = b_t.defined();
    ctx->saved_data["has_bias"] = bias_t.defined();
    ctx->saved_data["act"] = act;
    ctx->saved_data["timer"] = reinterpret_cast<int64_t>(timer);
    Remade* stash = nullptr;
    if (timer != nullptr && timer->replay != nullptr) {
      stash = timer->replay->NewStash<Remade>();
      timer->replay->Add([stash, act, timer, a = Leaf(a), b = Leaf(b_t)] {
        *stash = Remake(static_cast<MlpActivation>(act), a, b, timer);
      });
    }
    ctx->saved_data["stash"] = reinterpret_cast<int64_t>(stash);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &weight = saved[1];
    size_t next = 2;
    const at::Tensor b = ctx->saved_data["has_b"].toBool() ? saved[next++] : at::Tensor();
    const at::Tensor bias = ctx->saved_data["has_bias"].toBool() ? saved[next] : at::Tensor();
    const auto act = static_cast<MlpActivation>(ctx->saved_data["act"].toInt());
    auto* timer = reinterpret_cast<RecomputeTimer*>(ctx->saved_data["timer"].toInt());
    const at::Tensor& dy = grad_outputs[0];
    // The recompute the layer's backward ran at its start, or else one now.
    auto* stash = reinterpret_cast<Remade*>(ctx->saved_data["stash"].toInt());
    Remade remade = stash != nullptr && stash->u.defined() ? std::move(*stash)
                                                           : Remake(act, Leaf(a), Leaf(b), timer);
    if (stash != nullptr) *stash = Remade();
    const at::Tensor a_leaf = std::move(remade.a), b_leaf = std::move(remade.b);
    const at::Tensor u = std::move(remade.u);
    c10::AutoGradMode grad_mode(true);
    // The linear's backward in the dtype it ran in (autocast's 16-bit copy
    // of the weight under amp), gradients cast to the weight's dtype.
    const at::Tensor w = weight.to(u.scalar_type());
    at::Tensor d_weight, d_bias;
    const at::Tensor dy2 = dy.reshape({-1, dy.size(-1)});
    if (weight.requires_grad()) {
      d_weight = dy2.t().mm(u.detach().reshape({-1, u.size(-1)})).to(weight.scalar_type());
    }
    if (bias.defined() && bias.requires_grad()) d_bias = dy2.sum(0).to(bias.scalar_type());
    at::Tensor d_a, d_b;
    variable_list inputs;
    if (a_leaf.requires_grad()) inputs.push_back(a_leaf);
    if (b_leaf.defined() && b_leaf.requires_grad()) inputs.push_back(b_leaf);
    if (!inputs.empty()) {
      const at::Tensor du = dy.matmul(w);
      variable_list grads = torch::autograd::grad({u}, inputs, {du}, /*retain_graph=*/false,
                                                  /*create_graph=*/false, /*allow_unused=*/true);
      size_t k = 0;
      if (a_leaf.requires_grad()) d_a = grads[k++];
      if (b_leaf.defined() && b_leaf.requires_grad()) d_b = grads[k];
    }
    return {d_a, d_b, d_weight, d_bias, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor RecomputedActivationLinear(MlpActivation act, const at::Tensor& a, const at::Tensor& b,
                                      const at::Tensor& weight, const at::Tensor& bias,
                                      RecomputeTimer* timer) {
  std::optional<at::Tensor> b_opt, bias_opt;
  if (b.defined()) b_opt = b;
  if (bias.defined()) bias_opt = bias;
  return ActivationLinear::apply(a, b_opt, weight, bias_opt, static_cast<int64_t>(act), timer);
}

}  // namespace remat::runtime
