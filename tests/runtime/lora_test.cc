// nf4 storage and PEFT's LoRA linear on LibTorch (runtime/src/lora.h).
#include "lora.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

namespace remat::runtime {
namespace {

// Every level, scaled by a block's absmax, comes back exactly.
TEST(Nf4, RoundTripsTheCodeTableExactly) {
  const std::array<float, 16>& l = Nf4Levels();
  at::Tensor levels = at::tensor(at::ArrayRef<float>(l.data(), l.size()), at::kFloat);
  // 8 blocks of 64: each the 16 levels 4 times, scaled by 2^k (exact in fp32).
  at::Tensor w = at::cat(std::vector<at::Tensor>(4, levels)).repeat({8, 1});
  w = w * at::pow(2.0, at::arange(8, at::kFloat) - 3).unsqueeze(1);
  const Nf4Weight q = QuantizeNf4(w);
  EXPECT_EQ(q.packed.scalar_type(), at::kByte);
  EXPECT_EQ(q.packed.numel(), w.numel() / 2);  // two nibbles a byte
  EXPECT_EQ(q.absmax.numel(), 8);
  EXPECT_TRUE(at::equal(DequantizeNf4(q, at::kFloat), w));
  // Byte layout: the first value in the high nibble (bitsandbytes' order).
  EXPECT_EQ(q.packed[0].item<int>(), 0 * 16 + 1);
}

// A normal(0, 0.02) weight is within half the widest gap between levels
// (0.152 of the block's absmax) everywhere, and far closer on average.
TEST(Nf4, QuantizedWeightIsWithinTheExpectedError) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({96, 100}) * 0.02;  // 9600: a partial last block
  const Nf4Weight q = QuantizeNf4(w);
  EXPECT_EQ(q.absmax.numel(), (9600 + 63) / 64);
  const at::Tensor back = DequantizeNf4(q, at::kFloat);
  ASSERT_EQ(back.sizes(), w.sizes());
  const at::Tensor err = (back - w).abs().reshape({-1});
  const at::Tensor bound =
      q.absmax.repeat_interleave(64).narrow(0, 0, w.numel()) * (0.5 * (1.0 - 0.6961928));
  EXPECT_TRUE((err <= bound + 1e-7).all().item<bool>());
  EXPECT_LT(err.mean().item<double>(), 0.1 * w.abs().mean().item<double>() + 1e-3);
  EXPECT_EQ(DequantizeNf4(q, at::kBFloat16).scalar_type(), at::kBFloat16);
}

// Gradients reach the adapter only and equal the closed form; with B zero
// (PEFT's init) the output is the base layer's.
TEST(LoraLinear, GradientsReachOnlyTheAdapter) {
  at::manual_seed(5);
  const at::Tensor x = at::randn({3, 8}, at::kDouble).requires_grad_(true);
  const at::Tensor w = at::randn({6, 8}, at::kDouble);  // frozen
  const at::Tensor bias = at::randn({6}, at::kDouble);
  LoraAdapter a = MakeLoraAdapter(8, 6, 2, 4.0, at::TensorOptions(at::kDouble),
                                  at::detail::getDefaultCPUGenerator());
  EXPECT_TRUE(at::equal(LoraLinear(x, w, bias, a, 0, true), at::linear(x, w, bias)));
  EXPECT_LE(a.a.abs().max().item<double>(), 1.0 / std::sqrt(8.0));
  {
    c10::NoGradGuard g;
    a.b.normal_();  // nonzero B, so that A gets a gradient too
  }
  const at::Tensor y = LoraLinear(x, w, bias, a, 0, true);
  const at::Tensor upstream = at::randn({3, 6}, at::kDouble);
  (y * upstream).sum().backward();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(bias.grad().defined());
  // dB = s * g^T (x A^T), dA = s * (g B)^T x, dx = g W + s * g B A.
  const double s = a.scale;
  EXPECT_EQ(s, 2.0);
  EXPECT_TRUE(at::allclose(a.b.grad(), s * upstream.t().mm(x.detach().mm(a.a.detach().t()))));
  EXPECT_TRUE(at::allclose(a.a.grad(), s * upstream.mm(a.b.detach()).t().mm(x.detach())));
  EXPECT_TRUE(
      at::allclose(x.grad(), upstream.mm(w) + s * upstream.mm(a.b.detach()).mm(a.a.detach())));
}

}  // namespace
}  // namespace remat::runtime
