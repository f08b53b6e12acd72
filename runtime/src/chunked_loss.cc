#include "chunked_loss.h"

#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace remat::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ChunkedLinearCrossEntropy : torch::autograd::Function<ChunkedLinearCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& targets, int64_t chunks, double softcap) {
    const int64_t n = x.size(0);
    const c10::DeviceType device = x.device().type();
    const at::ScalarType cdt = at::autocast::is_autocast_enabled(device)
                                   ? at::autocast::get_autocast_dtype(device)
                                   : x.scalar_type();
    const at::Tensor w = weight.to(cdt), xc = x.to(cdt);  // no copy where already cdt
    at::Tensor grad_w = weight.requires_grad() ? at::zeros_like(weight) : at::Tensor();
    at::Tensor grad_x = at::empty_like(x);
    const at::Tensor valid = targets.ne(-100);
    const int64_t count = std::max<int64_t>(1, valid.sum().item<int64_t>());
    const double scale = 1.0 / static_cast<double>(count);
    at::Tensor loss = at::zeros({}, x.options().dtype(at::kFloat));
    const int64_t rows = (n + chunks - 1) / chunks;
    for (int64_t start = 0; start < n; start += rows) {
      const int64_t m = std::min(rows, n - start);
      const at::Tensor xi = xc.narrow(0, start, m);
      const at::Tensor index = targets.narrow(0, start, m).clamp_min(0).unsqueeze(1);
      const at::Tensor keep = valid.narrow(0, start, m).unsqueeze(1).to(at::kFloat);
      at::Tensor g = at::mm(xi, w.t());  // the chunk's logits
      if (g.scalar_type() != at::kFloat) g = g.to(at::kFloat);
      // Soft-capped: t = tanh(logits / c) in place, c * t a new chunk.
      at::Tensor t;
      if (softcap > 0) {
        t = g.div_(softcap).tanh_();
        g = t * softcap;
      }
      // loss = log(sum(exp(l - max))) + max - l[target]; the gradient
      // softmax - one_hot made in place in the fp32 logits.
      const at::Tensor picked = g.gather(1, index);
      const at::Tensor top = at::amax(g, 1, /*keepdim=*/true);
      g.sub_(top).exp_();
      const at::Tensor sum = g.sum(1, /*keepdim=*/true);
      loss.add_(((sum.log() + top - picked) * keep).sum());
      g.div_(sum);
      g.scatter_add_(1, index, at::full({m, 1}, -1.0, g.options()));
      g.mul_(keep * scale);
      if (t.defined()) {  // times d(c * t)/d(logits) = 1 - t^2, made in t
        g.mul_(t.mul_(t).neg_().add_(1.0));
        t.reset();
      }
      at::Tensor gc = g.scalar_type() == cdt ? g : g.to(cdt);
      if (!gc.is_same(g)) g.reset();
      at::Tensor rows_grad = grad_x.narrow(0, start, m);
      if (grad_x.scalar_type() == cdt) {
        at::mm_out(rows_grad, gc, w);
      } else {
        rows_grad.copy_(at::mm(gc, w));
      }
      if (grad_w.defined()) {
        if (grad_w.scalar_type() == cdt) {
          grad_w.addmm_(gc.t(), xi);
        } else {
          grad_w.add_(at::mm(gc.t(), xi));
        }
      }
    }
    ctx->saved_data["grad_x"] = grad_x;
    if (grad_w.defined()) ctx->saved_data["grad_w"] = grad_w;
    return loss.mul_(scale);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& dy = grad_outputs[0];
    // x's gradient: a new tensor while the kept one lives (as an op's
    // input gradient next to what it saved); the weight's: the buffer
    // itself, scaled in place and released by the context.
    at::Tensor dx = ctx->saved_data["grad_x"].toTensor() * dy;
    ctx->saved_data.erase("grad_x");
    at::Tensor dw;
    auto it = ctx->saved_data.find("grad_w");
    if (it != ctx->saved_data.end()) {
      dw = it->second.toTensor();
      ctx->saved_data.erase(it);
      dw.mul_(dy);
    }
    return {dx, dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ChunkedLmLoss(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets,
                         int64_t chunks, double softcap) {
  return ChunkedLinearCrossEntropy::apply(x, weight, targets, std::max<int64_t>(1, chunks),
                                          softcap);
}

}  // namespace remat::runtime
