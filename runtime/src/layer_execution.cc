#include "layer_execution.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include "device.h"

namespace remat::runtime {
namespace {

// The layer's input as a leaf of its own graph (the batch, and the empty
// boundary a later pass's embedding gets, are used as they are), requiring
// grad unless what made it is frozen (InputRequiresGrad).
at::Tensor InputLeaf(const ChainModel& model, int layer, const at::Tensor& x) {
  if (layer == 0 || model.layer_kind(layer) == LayerKind::kEmbedding) return x;
  return x.detach().requires_grad_(model.InputRequiresGrad(layer));
}

}  // namespace

at::Tensor ForwardNoGrad(const ChainModel& model, int layer, const at::Tensor& x,
                         const at::Tensor& batch, const DropoutSeeds& seeds,
                         const std::vector<at::Tensor>& skips) {
  c10::NoGradGuard no_grad;
  const AutocastScope scope(model.config(), model.device());
  return model.Forward(layer, x, batch, seeds, skips);
}

// The attention core runs without grad; its output enters the epilogue's
// graph through this node, which keeps nothing of it (unlike a leaf, whose
// AccumulateGrad holds it): the output lives as long as an op after the
// core saves it (a trainable projection), and not past the epilogue where
// none does (a frozen one), as under torch's selective checkpoint. The
// gradient the epilogue's backward hands it is the core's to backpropagate.
class GradientTap : public torch::autograd::Node {
 public:
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    grad = std::move(grads.at(0));
    return {};
  }
  at::Tensor grad;
};

struct CoreRemade {
  Heads heads;  // leaves of q, k and v
  // Where the core's output from them enters its graph (the output itself
  // is not kept: it lives on where the core's backward saves it, as a
  // fused kernel does, and goes at once where it does not, as eager's
  // matmul; torch's selective checkpoint keeps no more).
  torch::autograd::Edge context;
  double ms = 0;  // the recompute's time
};

void ReleaseOutput(SavedLayer& saved) {
  if (!saved.output.defined()) return;
  saved.output_edge = torch::autograd::impl::gradient_edge(saved.output);
  saved.output = at::Tensor();
}

SavedLayer ForwardWithGrad(const ChainModel& model, int layer, const at::Tensor& x,
                           const at::Tensor& batch, const DropoutSeeds& seeds, int option,
                           const Timing& timing, const std::vector<at::Tensor>& skips) {
  c10::AutoGradMode grad(true);
  const AutocastScope scope(model.config(), model.device());
  SavedLayer s;
  s.input = InputLeaf(model, layer, x);
  for (const at::Tensor& t : skips) s.skips.push_back(t.detach().requires_grad_(true));
  const SelectiveParts parts = model.OptionParts(option);
  // The experts of a mixture are its MLP: recomputed through the MLP's timer.
  if (parts.mlp || parts.experts) s.mlp_timer = std::make_shared<RecomputeTimer>(RecomputeTimer{timing, 0});
  if (parts.norm) s.norm_timer = std::make_shared<RecomputeTimer>(RecomputeTimer{timing, 0});
  if (parts.dropout) s.dropout_timer = std::make_shared<RecomputeTimer>(RecomputeTimer{timing, 0});
  if (parts.core || parts.mlp || parts.experts || parts.norm) {
    s.replay = std::make_shared<BackwardReplay>();
    for (RecomputeTimer* t : {s.mlp_timer.get(), s.norm_timer.get()}) {
      if (t != nullptr) t->replay = s.replay.get();
    }
  }
  RecomputeTimer* const norm = s.norm_timer.get();
  // The draws of a forward whose dropouts keep no mask (the core's too,
  // unless the core is recomputed, which keeps its mask while its own
  // backward runs).
  DropoutSeeds drawn = seeds;
  drawn.regenerate = s.dropout_timer.get();
  if (!parts.core && !parts.mlp && !parts.norm && !parts.experts) {
    s.output = model.Forward(layer, s.input, batch, drawn, s.skips);
  } else if (!parts.core) {
    at::Tensor context =
        model.AttentionCore(layer, model.Prologue(layer, s.input, drawn, norm), drawn);
    s.output = model.Epilogue(layer, s.input, context, drawn, s.mlp_timer.get(), norm);
  } else {
    s.selective = true;
    s.seeds = seeds;
    s.heads = model.Prologue(layer, s.input, drawn, norm);
    // The core's recompute, queued between the prologue's norm and the
    // epilogue's, in forward order.
    s.core = s.replay->NewStash<CoreRemade>();
    Heads leaves;
    for (const at::Tensor& h : s.heads) leaves.push_back(h.detach().requires_grad_(h.requires_grad()));
    s.replay->Add([core = s.core, m = &model, layer, leaves = std::move(leaves), seeds, timing] {
      c10::AutoGradMode grad_mode(true);
      const DeviceClock clock(timing);
      {
        const AutocastScope scope(m->config(), m->device());
        const at::Tensor context = m->AttentionCore(layer, leaves, seeds);
        // q, k and v of frozen projections on an input without gradient
        // (LoRA's first block): the core has no backward.
        if (context.requires_grad()) core->context = torch::autograd::impl::gradient_edge(context);
      }
      core->heads = leaves;
      core->ms = clock.ElapsedMs();
    });
    at::Tensor context;
    {
      c10::NoGradGuard no_grad;
      context = model.AttentionCore(layer, s.heads, seeds);
    }
    s.context = std::make_shared<GradientTap>();
    torch::autograd::create_gradient_edge(context, s.context);
    s.output = model.Epilogue(layer, s.input, context, drawn, s.mlp_timer.get(), norm);
  }
  s.layer = layer;
  return s;
}

SavedLayer ForwardWithGradOnProducer(const ChainModel& model, int layer, SavedLayer& producer,
                                     const at::Tensor& batch, const DropoutSeeds& seeds) {
  c10::AutoGradMode grad(true);
  const AutocastScope scope(model.config(), model.device());
  SavedLayer s;
  s.input_edge = torch::autograd::impl::gradient_edge(producer.output);
  s.output = model.Forward(layer, producer.output, batch, seeds);
  s.layer = layer;
  producer.output_edge = s.input_edge;
  producer.output = at::Tensor();
  return s;
}

at::Tensor Backward(const ChainModel& model, SavedLayer& saved, const at::Tensor& grad_output,
                    double* recompute_ms,
                    std::vector<at::Tensor>* skip_grads) {
  if (recompute_ms != nullptr) *recompute_ms = 0;
  torch::autograd::Engine& engine = torch::autograd::Engine::get_default_engine();
  if (saved.input_edge.is_valid()) {
    // Run on its producer's graph: stop at the producer's output and hand
    // its gradient on (this layer has no weights to accumulate into).
    // Its output may itself have gone to a consumer run on this graph.
    const torch::autograd::Edge from = saved.output.defined()
                                           ? torch::autograd::impl::gradient_edge(saved.output)
                                           : saved.output_edge;
    const at::Tensor grad = grad_output.defined() ? grad_output : at::ones_like(saved.output);
    torch::autograd::variable_list grads =
        engine.execute({from}, {grad},
                       /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/false,
                       {saved.input_edge});
    return grads.at(0);
  }
  // A selective layer's recomputes, all made before any op's backward runs.
  if (saved.replay != nullptr) saved.replay->Run();
  // A tied embedding: autograd, running the whole step's graph, holds the
  // head's gradient of the shared weight in the weight's input buffer and
  // adds the embedding's dense gradient to it out of place (`old + new`,
  // InputBuffer::accumulate: the head's gradient is a view, which it does
  // not add into in place) before AccumulateGrad takes the sum. The chain
  // runs the two layers' backwards apart, so the embedding's runs onto an
  // empty .grad and the same sum is made here: the held gradient, the dense
  // one and their sum live together for a moment, as in transformers.
  at::Tensor tied, held;
  if (model.layer_kind(saved.layer) == LayerKind::kEmbedding) tied = model.TiedEmbedding();
  if (tied.defined()) {
    held = tied.grad();
    tied.mutable_grad().reset();
  }
  if ((saved.output.defined() && !saved.output.requires_grad()) ||
      (!saved.output.defined() && !saved.output_edge.is_valid())) {
    // A layer of frozen weights on an input without gradient (LoRA's
    // embedding): nothing to backpropagate (its output, released, left no
    // place in a graph).
    saved.output = at::Tensor();
  } else if (saved.output.defined()) {
    const at::Tensor grad = grad_output.defined() ? grad_output : at::ones_like(saved.output);
    torch::autograd::backward({saved.output}, {grad});
  } else {
    // The output was released, to a consumer that did not keep it or to
    // the loss as a skip (ReleaseOutput): start from its place in the graph.
    engine.execute({saved.output_edge}, {grad_output}, /*keep_graph=*/false,
                   /*create_graph=*/false, /*accumulate_grad=*/true);
    saved.output_edge = torch::autograd::Edge();
  }
  if (held.defined()) {
    tied.mutable_grad() = tied.grad().defined() ? held + tied.grad() : held;
    held = at::Tensor();
  }
  if (!saved.skips.empty()) {
    // The loss with separate passes: cat's backward hands the candidates'
    // gradients (the later skips' and the input's) out as views of one
    // buffer, which would live until the last of them dies. Each gets its
    // own copy, so that each is released when its layer is done with it,
    // as the planner models (the copies are this backward's workspace).
    std::vector<at::Tensor> grads;
    for (at::Tensor& leaf : saved.skips) {
      grads.push_back(leaf.grad());
      leaf.mutable_grad().reset();
    }
    grads.push_back(saved.input.grad());
    saved.input.mutable_grad().reset();
    for (at::Tensor& g : grads) {
      if (g.defined() && g.storage().nbytes() != g.nbytes()) g = g.clone();
    }
    saved.input.mutable_grad() = grads.back();
    grads.pop_back();
    if (skip_grads != nullptr) *skip_grads = std::move(grads);
  }
  saved.skips.clear();
  if (saved.mlp_timer != nullptr && recompute_ms != nullptr) *recompute_ms += saved.mlp_timer->ms;
  saved.mlp_timer.reset();
  // The dropouts' masks were drawn again in their backward, which has run
  // (the core's is the core's own when it is recomputed).
  if (saved.dropout_timer != nullptr && recompute_ms != nullptr) {
    *recompute_ms += saved.dropout_timer->ms;
  }
  saved.dropout_timer.reset();
  if (saved.selective) {
    // The epilogue gave the context's gradient; backpropagate it through the
    // core recomputed at the start (from the kept q, k, v, same dropout
    // mask), then through the prologue.
    std::vector<at::Tensor> heads_grads;
    {
      c10::AutoGradMode grad_mode(true);
      Heads heads = std::move(saved.core->heads);
      const torch::autograd::Edge context = std::move(saved.core->context);
      if (recompute_ms != nullptr) *recompute_ms += saved.core->ms;
      saved.core = nullptr;
      at::Tensor context_grad = std::move(saved.context->grad);
      saved.context.reset();
      if (context.is_valid() && context_grad.defined()) {
        engine.execute({context}, {context_grad}, /*keep_graph=*/false, /*create_graph=*/false,
                       /*accumulate_grad=*/true);
      }
      context_grad = at::Tensor();
      for (const at::Tensor& h : heads) heads_grads.push_back(h.grad());
    }
    std::vector<at::Tensor> outputs, grads;
    for (size_t i = 0; i < saved.heads.size(); ++i) {
      if (!saved.heads[i].requires_grad()) continue;
      outputs.push_back(saved.heads[i]);
      grads.push_back(heads_grads[i]);
    }
    if (!outputs.empty()) torch::autograd::backward(outputs, grads);
  }
  // The norms' recomputes ran when the backward started.
  if (saved.norm_timer != nullptr && recompute_ms != nullptr) *recompute_ms += saved.norm_timer->ms;
  saved.norm_timer.reset();
  saved.replay.reset();
  // Mixed precision with fp32 gradients: the 16-bit gradients this
  // backward created become fp32 ones (ChainModel::PromoteGradients).
  model.PromoteGradients();
  if (saved.layer == 0) return {};
  if (!saved.input.requires_grad()) return at::empty({0}, saved.input.options());
  at::Tensor input_grad = saved.input.grad();
  saved.input.mutable_grad().reset();
  return input_grad;
}

}  // namespace remat::runtime
