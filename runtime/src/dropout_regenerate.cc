#include "dropout_regenerate.h"

#include <torch/csrc/autograd/custom_function.h>

#include <mutex>

namespace remat::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The mask at::dropout multiplies by on the CPU (its _dropout_impl: an
// empty_like of the input, bernoulli_(1 - p), div_(1 - p)), drawn from `gen`.
at::Tensor CpuMask(at::IntArrayRef sizes, at::IntArrayRef strides, const at::TensorOptions& options,
                   double p, at::Generator gen) {
  return at::empty_strided(sizes, strides, options).bernoulli_(1 - p, gen).div_(1 - p);
}

// `grad` through the fused CUDA dropout whose draw began at (seed, offset)
// of the default generator: native_dropout on the gradient is the gradient
// times the same mask (and the 1 / (1 - p) scale). The default generator is
// restored after.
at::Tensor CudaMaskedGrad(const at::Tensor& grad, double p, uint64_t seed, uint64_t offset) {
  at::Generator gen = at::globalContext().defaultGenerator(grad.device());
  std::lock_guard<std::mutex> lock(gen.mutex());
  const uint64_t kept_seed = gen.current_seed(), kept_offset = gen.get_offset();
  gen.set_current_seed(seed);
  gen.set_offset(offset);
  at::Tensor out = std::get<0>(at::native_dropout(grad, p, /*train=*/true));
  gen.set_current_seed(kept_seed);
  gen.set_offset(kept_offset);
  return out;
}

struct MaskFreeDropout : torch::autograd::Function<MaskFreeDropout> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p,
                            RecomputeTimer* timer) {
    at::Generator gen = at::globalContext().defaultGenerator(x.device());
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      if (x.is_cpu()) {
        ctx->saved_data["generator"] = gen.clone();
      } else {
        ctx->saved_data["seed"] = static_cast<int64_t>(gen.current_seed());
        ctx->saved_data["offset"] = static_cast<int64_t>(gen.get_offset());
      }
    }
    ctx->saved_data["p"] = p;
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["strides"] = x.strides().vec();
    ctx->saved_data["timer"] = reinterpret_cast<int64_t>(timer);
    // Autograd is off here: the mask dies on return.
    return at::dropout(x, p, /*train=*/true);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    const double p = ctx->saved_data["p"].toDouble();
    auto* timer = reinterpret_cast<RecomputeTimer*>(ctx->saved_data["timer"].toInt());
    const DeviceClock clock(timer != nullptr ? timer->timing : Timing{});
    at::Tensor grad_input;
    if (grad.is_cpu()) {
      // mul's backward in at::dropout: the gradient times the mask.
      const at::Tensor mask = CpuMask(ctx->saved_data["sizes"].toIntVector(),
                                      ctx->saved_data["strides"].toIntVector(), grad.options(), p,
                                      ctx->saved_data["generator"].toGenerator());
      grad_input = grad * mask;
    } else {
      grad_input = CudaMaskedGrad(grad, p, static_cast<uint64_t>(ctx->saved_data["seed"].toInt()),
                                  static_cast<uint64_t>(ctx->saved_data["offset"].toInt()));
    }
    if (timer != nullptr) timer->ms += clock.ElapsedMs();
    return {grad_input, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor RegeneratedDropout(const at::Tensor& x, double p, RecomputeTimer* timer) {
  return MaskFreeDropout::apply(x, p, timer);
}

}  // namespace remat::runtime
