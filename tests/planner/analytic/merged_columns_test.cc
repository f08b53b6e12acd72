// sentence-transformers 6's merged columns (merge_columns, the default):
// MultipleNegativesRankingLoss embeds the anchors in one forward pass and
// the other columns merged into a second (embed_columns: anchors alone,
// then positives and negatives concatenated, (t - 1) * b texts, the
// embeddings reshaped and unbound). Under gradient checkpointing a
// recomputed layer of the second pass holds (t - 1) * b texts' tensors,
// twice one column's for triplets: what the three-pass model missed
// (bench/fidelity/hf_fidelity.sh, all-MiniLM-L6-v2 every layer: measured 573,139,372
// B, predicted 537,546,752 with three passes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/schedule/decisions.h"
#include "remat/input/input.h"
#include "remat/profile/profile.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

// all-MiniLM-L6-v2's shape, 32 examples of `texts` texts; `merge` "" for
// the default.
ModelConfig MiniLm(int texts, const std::string& merge = "") {
  return testing::MiniLmJob(texts, 32, merge);
}

Profile Analytic(const ModelConfig& c) { return testing::AnalyticOnCpu(c); }
const LayerProfile& Named(const Profile& p, const std::string& name) {
  return testing::NamedLayer(p, name);
}

TEST(MergedColumns, AnchorsThenTheOtherColumnsMerged) {
  const ModelConfig triplets = MiniLm(3);
  EXPECT_TRUE(triplets.merge_columns);  // sentence-transformers 6's default
  EXPECT_EQ(TextPasses(triplets), 2);
  EXPECT_EQ(PassSequences(triplets, 0), 32);
  EXPECT_EQ(PassSequences(triplets, 1), 64);
  EXPECT_EQ(PassOffset(triplets, 1), 32);
  // Pairs: anchors and positives, one pass each either way.
  EXPECT_EQ(TextPasses(MiniLm(2)), 2);
  EXPECT_EQ(PassSequences(MiniLm(2), 1), 32);
  // Columns not merged: one pass per column.
  const ModelConfig separate = MiniLm(3, "false");
  EXPECT_EQ(TextPasses(separate), 3);
  EXPECT_EQ(PassSequences(separate, 2), 32);
  EXPECT_EQ(PassOffset(separate, 2), 64);
  // One pass: every sequence.
  ModelConfig mlm = separate;
  mlm.head = Head::kMlm;
  mlm.loss = Loss::kCrossEntropy;
  mlm.texts_per_example = 1;
  mlm.micro_batch = 96;
  EXPECT_EQ(TextPasses(mlm), 1);
  EXPECT_EQ(PassSequences(mlm, 0), 96);
}

TEST(MergedColumns, TheCandidatesPassKeepsItsTextsTensors) {
  const Profile p = Analytic(MiniLm(3));
  std::vector<std::string> names;
  for (const LayerProfile& l : p.layers) names.push_back(l.name);
  std::vector<std::string> want;
  for (const char* pass : {"p1.", "p2."}) {
    want.push_back(std::string(pass) + "embedding");
    for (int b = 0; b < 6; ++b) want.push_back(pass + std::string("block") + std::to_string(b));
    want.push_back(std::string(pass) + "head");
  }
  want.push_back("loss");
  EXPECT_EQ(names, want);
  EXPECT_EQ(p.parameters, 22'713'216);

  const int64_t b = 32, s = 75, h = 384, t = 3;
  // Every byte a block keeps is per token or per (text, head, s x s): the
  // candidates' block keeps (t - 1) times the anchors'.
  for (int blk = 0; blk < 6; ++blk) {
    const std::string name = "block" + std::to_string(blk);
    EXPECT_EQ(Named(p, "p2." + name).activation_bytes,
              (t - 1) * Named(p, "p1." + name).activation_bytes);
    EXPECT_EQ(Named(p, "p2." + name).input_bytes, (t - 1) * b * s * h * 4);
  }
  // The anchors' sentence embeddings skip to the loss; the candidates'
  // ((t - 1) b x h, fp32) are the loss's input.
  EXPECT_EQ(Named(p, "p1.head").skip_bytes, b * h * 4);
  EXPECT_EQ(Named(p, "p2.head").skip_bytes, 0);
  EXPECT_EQ(Named(p, "p2.head").output_bytes, (t - 1) * b * h * 4);
  EXPECT_EQ(Named(p, "loss").input_bytes, (t - 1) * b * h * 4);
  // Without checkpointing the two passes keep what three keep: the same
  // texts through the same ops. The sentence embeddings, 3 b x h fp32, are
  // skips and the last pass's output: b h (skip) + 2 b h (output) merged,
  // 2 b h (skips) + b h (output) separate.
  const Profile separate = Analytic(MiniLm(3, "false"));
  int64_t merged_kept = 0, separate_kept = 0;
  for (const LayerProfile& l : p.layers) merged_kept += l.activation_bytes + l.skip_bytes;
  for (const LayerProfile& l : separate.layers) separate_kept += l.activation_bytes + l.skip_bytes;
  EXPECT_EQ(merged_kept, separate_kept);
  EXPECT_EQ(Named(separate, "p3.head").output_bytes + Named(separate, "p1.head").skip_bytes +
                Named(separate, "p2.head").skip_bytes,
            t * b * h * 4);
}

// Every block checkpointed (transformers' gradient_checkpointing_enable):
// the first block recomputed in backward is the candidates' last, and at
// the peak, in its backward, its recompute holds A2 = (t - 1) A1 bytes,
// A1 = what one anchors' block saves besides its output (84.52 MiB here;
// the recompute frees the output as soon as it is made): twice what any
// block recomputed with one pass per column. With columns separate the
// recompute at the peak is one column's block, A1.
TEST(MergedColumns, CheckpointedPeakHoldsTheMergedPassRecompute) {
  for (const char* merge : {"true", "false"}) {
    SCOPED_TRACE(merge);
    const Profile p = Analytic(MiniLm(3, merge));
    std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
    for (int i : BlockLayers(p)) d[i] = LayerDecision::kCheckpoint;
    Result<Schedule> s = BuildSingleLevelSchedule(p, d, {});
    ASSERT_TRUE(s.ok()) << s.status().message();
    Result<SimulationResult> r = Simulate(p, *s);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LayerProfile& last = p.layers[s->ops[r->peak_op].layer];
    const LayerProfile& anchors = Named(p, "p1.block5");
    const int64_t a1 = anchors.activation_bytes - anchors.output_bytes;
    EXPECT_EQ(a1, 88'627'200);
    if (std::string(merge) == "false") {
      EXPECT_EQ(r->at_peak[MemoryCategory::kRecomputed], a1);
    } else {
      // The peak: the candidates' block 5, recomputed, in its backward.
      EXPECT_EQ(last.name, "p2.block5");
      EXPECT_EQ(r->at_peak[MemoryCategory::kRecomputed], 2 * a1);
    }
    EXPECT_EQ(r->at_peak[MemoryCategory::kRecomputed], last.activation_bytes - last.output_bytes)
        << last.name;
  }
}

}  // namespace
}  // namespace remat
