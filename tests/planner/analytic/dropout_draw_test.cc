// The time of a dropout's random draw (DeviceSpec::random_elements_per_s):
// on the cpu device each dropout's forward, and the "dropout_mask" option's
// recompute of it, add elements / rate to the roofline; the GPUs have no
// such term.
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "remat/profile/profile.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

using testing::Option;

constexpr int64_t s = 2048, h = 1024, a = 16;
// A GPT block's dropouts (micro-batch 1): two residual (s h elements each)
// and eager attention's on the probabilities (a s^2).
constexpr double kResidual = 2.0 * s * h, kAttention = 1.0 * a * s * s;

LayerProfile CpuBlock(double random_elements_per_s) {
  Result<DeviceSpec> cpu = LookupDevice("cpu");
  EXPECT_TRUE(cpu.ok());
  AnalyticOptions o;
  if (cpu.ok()) o.device = *cpu;
  o.device.random_elements_per_s = random_elements_per_s;
  Result<Profile> p =
      AnalyticProfile(testing::GptLayerShape(h, a, Precision::kFp32, AttentionImpl::kEager), o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? testing::FirstBlock(*p) : LayerProfile{};
}

TEST(DropoutDraw, OnlyTheCpuPresetHasARate) {
  for (const std::string& name : DeviceNames()) {
    Result<DeviceSpec> d = LookupDevice(name);
    ASSERT_TRUE(d.ok());
    if (name == "cpu") {
      EXPECT_DOUBLE_EQ(d->random_elements_per_s, 1.1e8);
    } else {
      EXPECT_EQ(d->random_elements_per_s, 0) << name;
    }
  }
}

// The block's forward adds every dropout's draw; dropout_mask's recompute
// adds the three it draws again; all four adds the residual two (the
// attention core's recompute, in both, draws the attention's mask).
TEST(DropoutDraw, CpuBlockAddsElementsOverTheRate) {
  const LayerProfile with = CpuBlock(1.1e8), without = CpuBlock(0);
  const double ms_per_element = 1e3 / 1.1e8;
  EXPECT_NEAR(with.forward_ms - without.forward_ms, (kResidual + kAttention) * ms_per_element,
              1e-9);
  // Backward multiplies by the kept mask: no draw.
  EXPECT_DOUBLE_EQ(with.backward_ms, without.backward_ms);
  const SelectiveOption* drop = Option(with, kDropoutMaskOption);
  const SelectiveOption* drop0 = Option(without, kDropoutMaskOption);
  const SelectiveOption* all4 = Option(with, kAllWithDropoutOption);
  const SelectiveOption* all40 = Option(without, kAllWithDropoutOption);
  const SelectiveOption* core = Option(with, kAttentionCoreOption);
  const SelectiveOption* core0 = Option(without, kAttentionCoreOption);
  ASSERT_TRUE(drop && drop0 && all4 && all40 && core && core0);
  EXPECT_NEAR(drop->extra_recompute_ms - drop0->extra_recompute_ms,
              (kResidual + kAttention) * ms_per_element, 1e-9);
  EXPECT_NEAR(all4->extra_recompute_ms - all40->extra_recompute_ms,
              (kResidual + kAttention) * ms_per_element, 1e-9);
  EXPECT_NEAR(core->extra_recompute_ms - core0->extra_recompute_ms, kAttention * ms_per_element,
              1e-9);
  // Without the term the roofline's two flops an element are memory-bound:
  // with it the draw dominates the recompute, several times the roofline.
  EXPECT_GT(drop->extra_recompute_ms, 5 * drop0->extra_recompute_ms);
  // Bytes do not move.
  EXPECT_EQ(drop->activation_bytes, drop0->activation_bytes);
  EXPECT_EQ(drop->recompute_workspace_bytes, drop0->recompute_workspace_bytes);
}

}  // namespace
}  // namespace remat
