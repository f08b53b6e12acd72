#include "moe_block.h"

#include <ATen/TensorIndexing.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <tuple>
#include <vector>

#include "device.h"

namespace remat::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// transformers' _grouped_linear without bias: x (S, in) sorted by expert
// through weight (E, out, in) transposed, `offsets` the cumulative rows per
// expert (int32). torch._grouped_mm is on no autocast list: it runs in the
// weight's dtype (transformers casts its input to it).
at::Tensor GroupedLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& offsets) {
  return at::_grouped_mm(x.to(weight.scalar_type()), weight.transpose(-2, -1), offsets);
}

// grouped_mm_experts_forward, op by op.
at::Tensor ExpertsForward(const at::Tensor& x, const at::Tensor& top_weights,
                          const at::Tensor& top_indices, const at::Tensor& gate_up,
                          const at::Tensor& down, MlpActivation activation) {
  const int64_t n = x.size(0), h = x.size(1), k = top_indices.size(1), E = gate_up.size(0);
  const int64_t f = gate_up.size(1) / 2;
  at::Tensor sorted_ids, perm;
  std::tie(sorted_ids, perm) = at::sort(top_indices.reshape({-1}));
  at::Tensor gathered = x.index({perm.div(k, "floor")});
  const at::Tensor weights = top_weights.reshape({-1}).index({perm});
  // histc on the CPU takes floats (transformers: ids.float() there).
  const at::Tensor ids = x.is_cpu() ? sorted_ids.to(at::kFloat) : sorted_ids.to(at::kInt);
  const at::Tensor offsets =
      at::cumsum(at::histc(ids, E, 0, E - 1), 0, at::kInt);
  sorted_ids = at::Tensor();
  at::Tensor t = GroupedLinear(gathered, gate_up, offsets);
  gathered = at::Tensor();
  // chunk(2): the gate and up halves are views; act(gate) * up.
  const at::Tensor gate = t.narrow(-1, 0, f), up = t.narrow(-1, f, f);
  t = (activation == MlpActivation::kGeGlu ? at::gelu(gate, "tanh") : at::silu(gate)) * up;
  t = GroupedLinear(t, down, offsets);
  t = t * weights.unsqueeze(-1);
  // The original order: inv_perm[perm] = arange, then the rows reordered.
  at::Tensor inv_perm = at::empty_like(perm);
  inv_perm.index_put_({perm}, at::arange(perm.size(0), perm.options()));
  t = t.index({inv_perm});
  return t.view({n, k, h}).sum(1).to(x.scalar_type());
}

// The experts made again from leaves of their inputs (the indices as they
// are), with grad, so that their backward is autograd's own.
struct Remade {
  variable_list leaves;  // x, top_weights, top_indices, gate_up, down
  at::Tensor out;
};

Remade Remake(const variable_list& inputs, MlpActivation activation, RecomputeTimer* timer) {
  c10::AutoGradMode grad_mode(true);
  Remade r;
  for (size_t i = 0; i < inputs.size(); ++i) {
    r.leaves.push_back(i == 2 ? inputs[i]
                              : inputs[i].detach().requires_grad_(inputs[i].requires_grad()));
  }
  const DeviceClock clock(timer != nullptr ? timer->timing : Timing{});
  r.out = ExpertsForward(r.leaves[0], r.leaves[1], r.leaves[2], r.leaves[3], r.leaves[4],
                         activation);
  if (timer != nullptr) timer->ms += clock.ElapsedMs();
  return r;
}

// The experts run without grad in forward, keeping their inputs only; the
// layer's backward makes them again with grad at its start (or this
// function's backward, without a replay) and backpropagates through them.
struct RecomputedExpertsFunction : torch::autograd::Function<RecomputedExpertsFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& top_weights, const at::Tensor& top_indices,
                            const at::Tensor& gate_up, const at::Tensor& down, int64_t activation,
                            RecomputeTimer* timer) {
    ctx->save_for_backward({x, top_weights, top_indices, gate_up, down});
    ctx->saved_data["activation"] = activation;
    ctx->saved_data["timer"] = reinterpret_cast<int64_t>(timer);
    Remade* stash = nullptr;
    if (timer != nullptr && timer->replay != nullptr) {
      stash = timer->replay->NewStash<Remade>();
      variable_list inputs;
      for (const at::Tensor& t : {x, top_weights, top_indices, gate_up, down}) {
        inputs.push_back(t.detach().requires_grad_(t.requires_grad()));
      }
      timer->replay->Add([stash, activation, timer, inputs = std::move(inputs)] {
        *stash = Remake(inputs, static_cast<MlpActivation>(activation), timer);
      });
    }
    ctx->saved_data["stash"] = reinterpret_cast<int64_t>(stash);
    return ExpertsForward(x, top_weights, top_indices, gate_up, down,
                          static_cast<MlpActivation>(activation));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* timer = reinterpret_cast<RecomputeTimer*>(ctx->saved_data["timer"].toInt());
    const auto activation = static_cast<MlpActivation>(ctx->saved_data["activation"].toInt());
    auto* stash = reinterpret_cast<Remade*>(ctx->saved_data["stash"].toInt());
    Remade remade = stash != nullptr && stash->out.defined()
                        ? std::move(*stash)
                        : Remake(ctx->get_saved_variables(), activation, timer);
    if (stash != nullptr) *stash = Remade();
    const variable_list leaves = std::move(remade.leaves);
    const at::Tensor out = std::move(remade.out);
    c10::AutoGradMode grad_mode(true);
    variable_list inputs;
    std::vector<size_t> index;
    for (size_t i : {0, 1, 3, 4}) {
      if (!leaves[i].requires_grad()) continue;
      inputs.push_back(leaves[i]);
      index.push_back(i);
    }
    variable_list grads(7);
    if (inputs.empty()) return grads;
    const variable_list d = torch::autograd::grad({out}, inputs, {grad_outputs[0]},
                                                  /*retain_graph=*/false, /*create_graph=*/false,
                                                  /*allow_unused=*/true);
    for (size_t j = 0; j < d.size(); ++j) grads[index[j]] = d[j];
    return grads;
  }
};

}  // namespace

Routing Route(const at::Tensor& x, const at::Tensor& router, int64_t top_k) {
  // MixtralTopKRouter / Qwen3MoeTopKRouter (norm_topk_prob): softmax of the
  // fp32 logits, top-k, renormalized in place.
  at::Tensor probs = at::softmax(at::linear(x, router), -1, at::kFloat);
  Routing r;
  std::tie(r.weights, r.indices) = at::topk(probs, top_k, -1);
  probs = at::Tensor();
  r.weights.div_(r.weights.sum(-1, /*keepdim=*/true));
  return r;
}

at::Tensor Experts(const at::Tensor& x, const Routing& routing, const ExpertWeights& w,
                   MlpActivation activation, RecomputeTimer* recompute) {
  if (recompute == nullptr) {
    return ExpertsForward(x, routing.weights, routing.indices, w.gate_up, w.down, activation);
  }
  return RecomputedExpertsFunction::apply(x, routing.weights, routing.indices, w.gate_up, w.down,
                                          static_cast<int64_t>(activation), recompute);
}

}  // namespace remat::runtime
