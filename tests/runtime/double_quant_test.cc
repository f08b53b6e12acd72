// double_quant (runtime/src/lora.h): nf4 weights whose absmax constants are
// themselves quantized to 8 bits, as bitsandbytes' nested quantization.
// The bytes stored are what the planner counts; the weight comes back within
// the nf4 error plus the 8-bit constants' error.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "chain_model.h"
#include "encoder_lora_tiny.h"
#include "lora.h"

namespace remat::runtime {
namespace {

// bitsandbytes' create_dynamic_map(signed=True): 127 magnitudes a sign over
// seven decades, 0 and 1, ascending.
TEST(DoubleQuant, DynamicCodeIsBitsandbytesSignedMap) {
  const std::array<float, 256>& l = Dynamic8BitLevels();
  EXPECT_TRUE(std::is_sorted(l.begin(), l.end()));
  EXPECT_TRUE(std::adjacent_find(l.begin(), l.end()) == l.end());  // distinct
  EXPECT_EQ(l.back(), 1.0f);
  EXPECT_FLOAT_EQ(l.front(), -(0.1f + 0.9f * 63 / 64 + 1.0f) / 2);  // -0.99297
  EXPECT_EQ(std::count(l.begin(), l.end(), 0.0f), 1);
  EXPECT_FLOAT_EQ(*std::upper_bound(l.begin(), l.end(), 0.0f), 0.55e-6f);
}

// The bytes held: packed nibbles, the 16-level code, a uint8 absmax a block,
// an fp32 constant per 256 blocks and one fp32 offset (the planner's
// Nf4Bytes(n, true)); 9600 values: 150 blocks, 1 constant; 19,201: 301
// blocks, 2 constants.
TEST(DoubleQuant, StoresTheBytesThePlannerCounts) {
  at::manual_seed(4);
  for (const auto& [n, bytes] : {std::pair<int64_t, int64_t>{9600, 4800 + 64 + 150 + 4 + 4},
                                 std::pair<int64_t, int64_t>{19201, 9601 + 64 + 301 + 8 + 4}}) {
    const Nf4Weight q = QuantizeNf4(at::randn({n}) * 0.02, 64, true);
    EXPECT_EQ(q.absmax.scalar_type(), at::kByte);
    EXPECT_EQ(q.nested_absmax.scalar_type(), at::kFloat);
    EXPECT_EQ(q.offset.numel(), 1);
    EXPECT_EQ(Nf4StoredBytes(q), bytes) << n;
    // Without double_quant: an fp32 absmax a block.
    EXPECT_EQ(Nf4StoredBytes(QuantizeNf4(at::randn({n}), 64, false)),
              (n + 1) / 2 + 64 + 4 * ((n + 63) / 64))
        << n;
  }
}

// The nibbles are those of plain nf4 (the weight is quantized with the fp32
// absmax); each absmax comes back within half the widest gap of the 8-bit
// code times its group's constant, so the weight within that of plain nf4's.
TEST(DoubleQuant, DequantizedWeightIsWithinTheConstantsError) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({96, 201}) * 0.02;  // 302 blocks: 2 groups, a partial last
  const Nf4Weight plain = QuantizeNf4(w, 64, false);
  const Nf4Weight nested = QuantizeNf4(w, 64, true);
  EXPECT_TRUE(at::equal(plain.packed, nested.packed));
  ASSERT_EQ(nested.nested_absmax.numel(), 2);
  const std::array<float, 256>& l = Dynamic8BitLevels();
  float gap = 0;
  for (size_t i = 1; i < l.size(); ++i) gap = std::max(gap, l[i] - l[i - 1]);
  EXPECT_LT(gap, 0.015f);
  const double bound = 0.5 * gap * nested.nested_absmax.max().item<double>() + 1e-8;
  const at::Tensor a = DequantizeNf4(plain, at::kFloat), b = DequantizeNf4(nested, at::kFloat);
  ASSERT_EQ(b.sizes(), w.sizes());
  EXPECT_LE((a - b).abs().max().item<double>(), bound);
  EXPECT_GT((a - b).abs().max().item<double>(), 0);  // the constants are quantized
  // Against the weight: the nf4 error (half the widest nf4 gap of the
  // absmax) plus the constants'.
  const double nf4 = 0.5 * (1.0 - 0.6961928) * plain.absmax.max().item<double>();
  EXPECT_LE((b - w).abs().max().item<double>(), nf4 + bound);
  EXPECT_EQ(DequantizeNf4(nested, at::kBFloat16).scalar_type(), at::kBFloat16);
}

// A model's weights: the frozen dense ones, the adapters and the nf4 ones
// hold the planner's parameter bytes exactly, and its buffers the planner's
// buffer bytes, double_quant or not, and the
// runtime runs every encoder and decoder with LoRA and double_quant.
TEST(DoubleQuant, ModelWeightsAreThePlannersParameterBytes) {
  std::vector<std::pair<std::string, ModelConfig>> families = testing::TinyEncoderLoraFamilies();
  ModelConfig llama = testing::WithLora(testing::TinyLlama(), kLoraAllLinear, true);
  llama.double_quant = true;
  families.emplace_back("llama_qlora_double_quant", llama);
  for (const auto& [name, c] : families) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ModelSupports(c).ok()) << ModelSupports(c).message();
    const Profile analytic = testing::AnalyticOf(c);
    const std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 1);
    int64_t bytes = model->quantized_bytes();
    for (const at::Tensor& t : model->parameters()) bytes += static_cast<int64_t>(t.nbytes());
    for (const at::Tensor& t : model->frozen_weights()) bytes += static_cast<int64_t>(t.nbytes());
    EXPECT_EQ(bytes, analytic.static_memory.parameter_bytes);
    EXPECT_EQ(model->buffer_bytes(), analytic.static_memory.buffer_bytes);
    EXPECT_EQ(model->quantized_bytes() > 0, c.quantization == Quantization::kNf4);
  }
}

}  // namespace
}  // namespace remat::runtime
