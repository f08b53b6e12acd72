#include "layer_execution.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include "device.h"

namespace remat::runtime {
namespace {

// The layer's input as a leaf of its own graph (the batch is used as is).
at::Tensor InputLeaf(int layer, const at::Tensor& x) {
  if (layer == 0) return x;
  return x.detach().requires_grad_(true);
}

}  // namespace

at::Tensor ForwardNoGrad(const ChainModel& model, int layer, const at::Tensor& x,
                         const at::Tensor& batch, const DropoutSeeds& seeds) {
  c10::NoGradGuard no_grad;
  return model.Forward(layer, x, batch, seeds);
}

SavedLayer ForwardWithGrad(const ChainModel& model, int layer, const at::Tensor& x,
                           const at::Tensor& batch, const DropoutSeeds& seeds, bool selective) {
  c10::AutoGradMode grad(true);
  SavedLayer s;
  s.input = InputLeaf(layer, x);
  if (!selective) {
    s.output = model.Forward(layer, s.input, batch, seeds);
  } else {
    s.selective = true;
    s.seeds = seeds;
    s.heads = model.Prologue(layer, s.input, seeds);
    {
      c10::NoGradGuard no_grad;
      s.context = model.AttentionCore(layer, s.heads, seeds);
    }
    s.context.requires_grad_(true);
    s.output = model.Epilogue(layer, s.input, s.context, seeds);
  }
  s.layer = layer;
  return s;
}

SavedLayer ForwardWithGradOnProducer(const ChainModel& model, int layer, SavedLayer& producer,
                                     const at::Tensor& batch, const DropoutSeeds& seeds) {
  c10::AutoGradMode grad(true);
  SavedLayer s;
  s.input_edge = torch::autograd::impl::gradient_edge(producer.output);
  s.output = model.Forward(layer, producer.output, batch, seeds);
  s.layer = layer;
  producer.output_edge = s.input_edge;
  producer.output = at::Tensor();
  return s;
}

at::Tensor Backward(const ChainModel& model, SavedLayer& saved, const at::Tensor& grad_output,
                    const Timing& timing, double* recompute_ms) {
  if (recompute_ms != nullptr) *recompute_ms = 0;
  torch::autograd::Engine& engine = torch::autograd::Engine::get_default_engine();
  if (saved.input_edge.is_valid()) {
    // Run on its producer's graph: stop at the producer's output and hand
    // its gradient on (this layer has no weights to accumulate into).
    const at::Tensor grad = grad_output.defined() ? grad_output : at::ones_like(saved.output);
    torch::autograd::variable_list grads =
        engine.execute({torch::autograd::impl::gradient_edge(saved.output)}, {grad},
                       /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/false,
                       {saved.input_edge});
    return grads.at(0);
  }
  if (saved.output.defined()) {
    const at::Tensor grad = grad_output.defined() ? grad_output : at::ones_like(saved.output);
    torch::autograd::backward({saved.output}, {grad});
  } else {
    // The output was released to a consumer that did not keep it: start
    // from its place in the graph.
    engine.execute({saved.output_edge}, {grad_output}, /*keep_graph=*/false,
                   /*create_graph=*/false, /*accumulate_grad=*/true);
  }
  if (saved.selective) {
    // The epilogue gave the context's gradient; recompute the core from the
    // kept q, k, v (same dropout mask) and backpropagate through it, then
    // through the prologue.
    std::vector<at::Tensor> heads_grads;
    {
      c10::AutoGradMode grad_mode(true);
      Heads heads;
      for (const at::Tensor& h : saved.heads) heads.push_back(h.detach().requires_grad_(true));
      const DeviceClock clock(timing);
      const at::Tensor context = model.AttentionCore(saved.layer, heads, saved.seeds);
      if (recompute_ms != nullptr) *recompute_ms = clock.ElapsedMs();
      at::Tensor context_grad = saved.context.grad();
      saved.context.mutable_grad().reset();
      torch::autograd::backward({context}, {context_grad});
      for (const at::Tensor& h : heads) heads_grads.push_back(h.grad());
    }
    torch::autograd::backward(saved.heads, heads_grads);
  }
  if (saved.layer == 0) return {};
  at::Tensor input_grad = saved.input.grad();
  saved.input.mutable_grad().reset();
  return input_grad;
}

}  // namespace remat::runtime
