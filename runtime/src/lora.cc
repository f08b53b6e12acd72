#include "lora.h"

#include <c10/core/GradMode.h>

#include <cmath>

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

namespace {

at::Tensor LevelsTensor(const at::Device& device) {
  const std::array<float, 16>& l = Nf4Levels();
  return at::tensor(at::ArrayRef<float>(l.data(), l.size()), at::kFloat).to(device);
}

}  // namespace

Nf4Weight QuantizeNf4(const at::Tensor& w, int64_t block) {
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
  at::Tensor index = (scaled.unsqueeze(-1) - levels).abs().argmin(-1).reshape({-1});
  index = index.narrow(0, 0, n).to(at::kByte);
  if (n % 2 != 0) index = at::cat({index, at::zeros({1}, index.options())});
  const at::Tensor pairs = index.view({-1, 2});
  q.packed = (pairs.select(1, 0) * 16 + pairs.select(1, 1)).to(at::kByte).contiguous();
  return q;
}

at::Tensor DequantizeNf4(const Nf4Weight& q, at::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t d : q.shape) n *= d;
  const int64_t blocks = q.absmax.numel();
  const int64_t block = (n + blocks - 1) / blocks;
  const at::Tensor high = at::floor_divide(q.packed, 16).to(at::kLong);
  const at::Tensor low = at::remainder(q.packed, 16).to(at::kLong);
  const at::Tensor index = at::stack({high, low}, 1).reshape({-1}).narrow(0, 0, n);
  at::Tensor values = LevelsTensor(q.packed.device()).index_select(0, index);
  const at::Tensor scale = q.absmax.repeat_interleave(block).narrow(0, 0, n);
  return (values * scale).to(dtype).view(q.shape);
}

LoraAdapter MakeLoraAdapter(int64_t in, int64_t out, int64_t rank, double alpha,
                            const at::TensorOptions& options, at::Generator gen) {
  LoraAdapter a;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  a.a = at::empty({rank, in}, options.requires_grad(false));
  a.a.uniform_(-bound, bound, gen);
  a.a.requires_grad_(true);
  a.b = at::zeros({out, rank}, options.requires_grad(false)).requires_grad_(true);
  a.scale = alpha / static_cast<double>(rank);
  return a;
}

at::Tensor LoraLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const LoraAdapter& adapter, double dropout, bool train) {
  const at::Tensor base = at::linear(x, weight, bias);
  const at::Tensor input = dropout > 0 ? at::dropout(x, dropout, train) : x;
  return base + at::linear(at::linear(input, adapter.a), adapter.b) * adapter.scale;
}

}  // namespace remat::runtime
