// The analytic CPU model's time for drawing dropout masks again (the
// "dropout_mask" option's extra_recompute_ms, DeviceSpec::
// random_elements_per_s) against what the runtime measures for the same
// blocks: RegeneratedDropout's backward, a Bernoulli draw and a multiply.
#include <gtest/gtest.h>

#include <iostream>

#include "memory_meter.h"
#include "profiler.h"
#include "remat/analytic.h"
#include "remat/model_config.h"
#include "remat/profile.h"

namespace remat::runtime {
namespace {

const SelectiveOption* DropoutMask(const LayerProfile& l) {
  for (const SelectiveOption& o : l.selective) {
    if (o.name == kDropoutMaskOption) return &o;
  }
  return nullptr;
}

// bench/models/cpu-bert-s.json with two blocks: fp32, eager attention,
// dropout 0.1 (three dropouts a block, 393,216 elements drawn).
TEST(DropoutDrawTime, AnalyticRecomputeIsWithinTwiceTheMeasured) {
  Result<ModelConfig> c = ParseModelConfig(R"({"name": "cpu-bert-s", "architecture": "bert",
    "layers": 2, "hidden": 128, "heads": 4, "vocab": 2048, "seq_len": 128, "max_position": 130,
    "type_vocab": 2, "micro_batch": 4, "precision": "fp32", "optimizer": "adamw",
    "attention": "eager", "dropout": 0.1})",
                                           "cpu-bert-s.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  // The thread's CPU time, fastest of five: robust to a busy machine.
  MeasureOptions m;
  m.warmup = 1;
  m.repeats = 5;
  m.statistic = "min";
  Timing thread;
  thread.clock = ClockKind::kThreadCpu;
  Result<Profile> measured = MeasureProfile(*c, m, thread, CpuMeter());
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  Result<DeviceSpec> cpu = LookupDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  AnalyticOptions o;
  o.device = *cpu;
  Result<Profile> analytic = AnalyticProfile(*c, o);
  o.device.random_elements_per_s = 0;
  Result<Profile> roofline = AnalyticProfile(*c, o);
  ASSERT_TRUE(analytic.ok() && roofline.ok());
  ASSERT_EQ(measured->num_layers(), analytic->num_layers());
  // Summed over the blocks: one block's fastest still varies by
  // about 20% on a busy machine.
  int blocks = 0;
  double a_ms = 0, r_ms = 0, t_ms = 0;
  for (int i = 0; i < analytic->num_layers(); ++i) {
    const SelectiveOption* a = DropoutMask(analytic->layers[i]);
    const SelectiveOption* r = DropoutMask(roofline->layers[i]);
    const SelectiveOption* t = DropoutMask(measured->layers[i]);
    if (a == nullptr) continue;
    ASSERT_TRUE(r != nullptr && t != nullptr) << analytic->layers[i].name;
    ++blocks;
    a_ms += a->extra_recompute_ms;
    r_ms += r->extra_recompute_ms;
    t_ms += t->extra_recompute_ms;
    std::cout << analytic->layers[i].name << " dropout_mask recompute: analytic "
              << a->extra_recompute_ms << " ms (roofline alone " << r->extra_recompute_ms
              << " ms), measured " << t->extra_recompute_ms << " ms\n";
  }
  std::cout << "blocks' dropout_mask recompute: analytic/measured " << a_ms / t_ms
            << ", roofline alone/measured " << r_ms / t_ms << "\n";
  EXPECT_GT(a_ms, 0.5 * t_ms);
  EXPECT_LT(a_ms, 2.0 * t_ms);
  // The roofline alone (two memory-bound flops an element) was far below.
  EXPECT_LT(r_ms, 0.5 * t_ms);
  EXPECT_EQ(blocks, 2);
}

}  // namespace
}  // namespace remat::runtime
