// What the runtime keeps under CPU autocast (amp_bf16), measured layer by
// layer, against the analytic model's --device cpu figures: each trained
// linear's bf16 weight copy in the blocks and the head, and, in the loss,
// F.cross_entropy's fp32 log-probabilities only (docs/analytic-model.md,
// "Autocast on CPU").
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "remat/runtime/torch_runtime.h"
#include "testing/minilm_job.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

TEST(AmpKept, MeasuredLayersKeepWhatTheAnalyticCpuModelKeeps) {
  ModelConfig c = testing::TinyGpt();
  c.precision = Precision::kAmpBf16;
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  MeasureOptions m;
  m.repeats = 1;
  Result<Profile> measured = runtime->Measure(c, m);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  AnalyticOptions o;
  o.device = *LookupDevice("cpu");
  Result<Profile> analytic = AnalyticProfile(c, o);
  ASSERT_TRUE(analytic.ok()) << analytic.status().message();

  for (const char* name : {"block0", "block3", "final_norm", "head"}) {
    EXPECT_EQ(testing::NamedLayer(*measured, name).activation_bytes,
              testing::NamedLayer(*analytic, name).activation_bytes)
        << name;
  }
  // The loss: fp32 log-probabilities (4nV), the loss and nll_loss's total
  // weight (fp32 scalars; the analytic model counts the loss only). Not the
  // 6nV that log_softmax + nll_loss called apart keep under CPU autocast.
  const int64_t n = c.micro_batch * c.seq_len, V = c.vocab;
  EXPECT_EQ(testing::NamedLayer(*measured, "loss").activation_bytes, 4 * n * V + 8);
  EXPECT_EQ(testing::NamedLayer(*analytic, "loss").activation_bytes, 4 * n * V + 4);
  EXPECT_EQ(testing::NamedLayer(*measured, "loss").backward_workspace_bytes,
            testing::NamedLayer(*analytic, "loss").backward_workspace_bytes);
}

}  // namespace
}  // namespace remat::runtime
