#include "lora.h"

#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace remat::runtime {

const std::array<float, 16>& Nf4Levels() {
  static const std::array<float, 16> levels = {-1.0f,
                                               -0.6961928009986877f,
                                               -0.5250730514526367f,
                                               -0.39491748809814453f,
                                               -0.28444138169288635f,
                                               -0.18477343022823334f,
                                               -0.09105003625154495f,
                                               0.0f,
                                               0.07958029955625534f,
                                               0.16093020141124725f,
                                               0.24611230194568634f,
                                               0.33791524171829224f,
                                               0.44070982933044434f,
                                               0.5626170039176941f,
                                               0.7229568362236023f,
                                               1.0f};
  return levels;
}

const std::array<float, 256>& Dynamic8BitLevels() {
  // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for
  // exponent i in 0..6, the midpoints of linspace(0.1, 1, 2^i + 1) scaled by
  // 10^(i - 6), both signs; then 0 and 1; sorted.
  static const std::array<float, 256> levels = [] {
    std::vector<float> data;
    for (int i = 0; i < 7; ++i) {
      const int items = (1 << i) + 1;
      const double scale = std::pow(10.0, i - 6);
      for (int j = 0; j + 1 < items; ++j) {
        const double lo = 0.1 + 0.9 * j / (items - 1), hi = 0.1 + 0.9 * (j + 1) / (items - 1);
        // linspace and the mean in fp32, as torch computes them.
        const float mean = (static_cast<float>(lo) + static_cast<float>(hi)) / 2.0f;
        data.push_back(static_cast<float>(scale * mean));
        data.push_back(static_cast<float>(-scale * mean));
      }
    }
    data.push_back(0.0f);
    data.push_back(1.0f);
    std::sort(data.begin(), data.end());
    std::array<float, 256> out{};
    std::copy(data.begin(), data.end(), out.begin());
    return out;
  }();
  return levels;
}

namespace {

template <size_t N>
at::Tensor Table(const std::array<float, N>& l, const at::Device& device) {
  return at::tensor(at::ArrayRef<float>(l.data(), l.size()), at::kFloat).to(device);
}

at::Tensor LevelsTensor(const at::Device& device) { return Table(Nf4Levels(), device); }

// Index of the nearest of `levels` for each of `values` (fp32, any shape):
// uint8, flattened.
at::Tensor NearestLevel(const at::Tensor& values, const at::Tensor& levels) {
  return (values.unsqueeze(-1) - levels).abs().argmin(-1).reshape({-1}).to(at::kByte);
}

// The fp32 absmax of blocks [first, first + count) of `q`: q.absmax itself,
// or, double-quantized, level * nested constant + offset (`first`: a
// multiple of kNf4NestedBlocks, as DequantizeNf4's chunks are).
at::Tensor AbsmaxOf(const Nf4Weight& q, int64_t first, int64_t count) {
  const at::Tensor stored = q.absmax.narrow(0, first, count);
  if (!q.nested_absmax.defined()) return stored;
  const at::Tensor levels = Table(Dynamic8BitLevels(), q.absmax.device());
  const at::Tensor nested =
      q.nested_absmax
          .narrow(0, first / kNf4NestedBlocks, (count + kNf4NestedBlocks - 1) / kNf4NestedBlocks)
          .repeat_interleave(kNf4NestedBlocks)
          .narrow(0, 0, count);
  return at::embedding(levels.unsqueeze(1), stored.to(at::kLong)).view({-1}) * nested + q.offset;
}

}  // namespace

Nf4Weight QuantizeNf4(const at::Tensor& w, int64_t block, bool double_quant) {
  c10::NoGradGuard no_grad;
  Nf4Weight q;
  q.shape = w.sizes().vec();
  const int64_t n = w.numel();
  const int64_t blocks = (n + block - 1) / block;
  at::Tensor flat = w.detach().reshape({-1}).to(at::kFloat);
  if (blocks * block != n) flat = at::cat({flat, at::zeros({blocks * block - n}, flat.options())});
  const at::Tensor rows = flat.view({blocks, block});
  q.absmax = rows.abs().amax(1);
  const at::Tensor safe = at::where(q.absmax > 0, q.absmax, at::ones_like(q.absmax));
  const at::Tensor scaled = rows / safe.unsqueeze(1);
  // Nearest level: argmin of the distance to each of the 16.
  const at::Tensor levels = LevelsTensor(w.device());
  at::Tensor index = NearestLevel(scaled, levels).narrow(0, 0, n);
  if (n % 2 != 0) index = at::cat({index, at::zeros({1}, index.options())});
  const at::Tensor pairs = index.view({-1, 2});
  q.packed = (pairs.select(1, 0) * 16 + pairs.select(1, 1)).to(at::kByte).contiguous();
  q.code = levels;
  if (double_quant) {
    // bitsandbytes: offset = absmax.mean(); quantize_blockwise(absmax -
    // offset, blocksize=256) with the dynamic 8-bit code.
    q.offset = q.absmax.mean().reshape({1});
    const int64_t nested = (blocks + kNf4NestedBlocks - 1) / kNf4NestedBlocks;
    at::Tensor centered = q.absmax - q.offset;
    if (nested * kNf4NestedBlocks != blocks) {
      centered =
          at::cat({centered, at::zeros({nested * kNf4NestedBlocks - blocks}, centered.options())});
    }
    const at::Tensor groups = centered.view({nested, kNf4NestedBlocks});
    q.nested_absmax = groups.abs().amax(1).contiguous();
    const at::Tensor safe_nested =
        at::where(q.nested_absmax > 0, q.nested_absmax, at::ones_like(q.nested_absmax));
    q.absmax =
        NearestLevel(groups / safe_nested.unsqueeze(1), Table(Dynamic8BitLevels(), w.device()))
            .narrow(0, 0, blocks)
            .contiguous();
  }
  return q;
}

int64_t Nf4StoredBytes(const Nf4Weight& q) {
  int64_t bytes = 0;
  for (const at::Tensor* t : {&q.packed, &q.absmax, &q.code, &q.nested_absmax, &q.offset}) {
    if (t->defined()) bytes += static_cast<int64_t>(t->nbytes());
  }
  return bytes;
}

at::Tensor DequantizeNf4(const Nf4Weight& q, at::ScalarType dtype) {
  c10::NoGradGuard no_grad;
  int64_t n = 1;
  for (int64_t d : q.shape) n *= d;
  const int64_t blocks = q.absmax.numel();
  const int64_t block = (n + blocks - 1) / blocks;
  const at::Tensor code = q.code.defined() ? q.code : LevelsTensor(q.packed.device());
  // Byte -> its two values (high nibble first): a (256, 2) table.
  const at::Tensor pairs = at::stack({code.repeat_interleave(16), code.repeat({16})}, 1);
  // The weight is written chunk by chunk into its result, so that the
  // transient is the dequantized weight and a few small chunks (what the
  // planner counts: the weight in `dtype`).
  at::Tensor out = at::empty({n}, code.options().dtype(dtype));
  const int64_t chunk = block * 256;  // even, whole blocks
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    const at::Tensor bytes = q.packed.narrow(0, start / 2, (len + 1) / 2).to(at::kInt);
    at::Tensor values = at::embedding(pairs, bytes).view({-1}).narrow(0, 0, len);
    const at::Tensor scale = AbsmaxOf(q, start / block, (len + block - 1) / block)
                                 .repeat_interleave(block)
                                 .narrow(0, 0, len);
    out.narrow(0, start, len).copy_(values.mul_(scale));
  }
  return out.view(q.shape);
}

LoraAdapter MakeLoraAdapter(int64_t in, int64_t out, int64_t rank, double alpha,
                            const at::TensorOptions& options, at::Generator gen) {
  LoraAdapter a;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  at::Tensor drawn = at::empty({rank, in}, at::kFloat);
  drawn.uniform_(-bound, bound, gen);
  a.a = drawn.to(options.requires_grad(false)).requires_grad_(true);
  a.b = at::zeros({out, rank}, options.requires_grad(false)).requires_grad_(true);
  a.scale = alpha / static_cast<double>(rank);
  return a;
}

namespace {

// bitsandbytes' MatMul4Bit: nothing of the forward is saved but references
// to the (persistent) packed weight; backward dequantizes it again.
class Nf4LinearFunction : public torch::autograd::Function<Nf4LinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& packed, const at::Tensor& absmax,
                            const at::Tensor& code, std::vector<int64_t> shape,
                            const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& nested,
                            const std::optional<at::Tensor>& offset) {
    ctx->saved_data["packed"] = packed;
    ctx->saved_data["absmax"] = absmax;
    ctx->saved_data["code"] = code;
    ctx->saved_data["shape"] = shape;
    if (nested.has_value()) {
      ctx->saved_data["nested"] = *nested;
      ctx->saved_data["offset"] = *offset;
    }
    const Nf4Weight q{packed,
                      absmax,
                      code,
                      std::move(shape),
                      nested.value_or(at::Tensor()),
                      offset.value_or(at::Tensor())};
    at::Tensor w = DequantizeNf4(q, x.scalar_type());
    return at::linear(x, w, bias.has_value() ? bias->to(x.scalar_type()) : at::Tensor());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    Nf4Weight q;
    q.packed = ctx->saved_data["packed"].toTensor();
    q.absmax = ctx->saved_data["absmax"].toTensor();
    q.code = ctx->saved_data["code"].toTensor();
    q.shape = ctx->saved_data["shape"].toIntVector();
    if (ctx->saved_data.count("nested") != 0) {
      q.nested_absmax = ctx->saved_data["nested"].toTensor();
      q.offset = ctx->saved_data["offset"].toTensor();
    }
    const at::Tensor& g = grads[0];
    at::Tensor grad_x = at::matmul(g, DequantizeNf4(q, g.scalar_type()));
    return {grad_x,       at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor Nf4Linear(const at::Tensor& x, const Nf4Weight& w, const at::Tensor& bias) {
  auto optional = [](const at::Tensor& t) {
    return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
  };
  return Nf4LinearFunction::apply(x, w.packed, w.absmax, w.code, w.shape, optional(bias),
                                  optional(w.nested_absmax), optional(w.offset));
}

at::Tensor ProjectionForward(const at::Tensor& x, const Projection& p, double dropout) {
  const c10::DeviceType type = x.device().type();
  const bool autocast = at::autocast::is_autocast_enabled(type);
  at::Tensor base;
  if (p.nf4.packed.defined()) {
    const at::Tensor xin = autocast ? x.to(at::autocast::get_autocast_dtype(type)) : x;
    base = Nf4Linear(xin, p.nf4, p.bias);
  } else {
    base = at::linear(x, p.weight, p.bias);
  }
  if (!p.adapter.a.defined()) return base;
  // Each intermediate dies where PEFT's Python frees it: dropout(x) after
  // lora_A (unless saved), A's output after lora_B, B's after the scaling,
  // the scaled update after the sum (C++ temporaries of one expression
  // would all live to its end: a transient of the output's size more).
  at::Tensor update;
  {
    at::Tensor input = dropout > 0 ? at::dropout(x, dropout, /*train=*/true) : x;
    if (!autocast && input.scalar_type() != p.adapter.a.scalar_type()) {
      input = input.to(p.adapter.a.scalar_type());  // PEFT: x.to(lora_A.weight.dtype)
    }
    update = at::linear(input, p.adapter.a);
  }
  update = at::linear(update, p.adapter.b);
  update = update * p.adapter.scale;
  at::Tensor sum = base + update;
  update.reset();
  if (sum.scalar_type() != base.scalar_type()) sum = sum.to(base.scalar_type());
  return sum;
}

at::Tensor LoraLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const LoraAdapter& adapter, double dropout, bool train) {
  return ProjectionForward(x, Projection{weight, {}, bias, adapter}, train ? dropout : 0);
}

}  // namespace remat::runtime
