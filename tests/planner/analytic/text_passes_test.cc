// sentence-transformers' separate passes per text group: with the mnrl loss
// and column merging off (merge_columns false: versions before 6, or
// column_merging_disabled()) anchors, positives and negatives go through the
// encoder one pass each (`reps = [model(f)["sentence_embedding"] for f in
// features]`), then one loss and one backward. Merged columns (the
// default): merged_columns_test.cc. The chain repeats its layers per pass; each pass's
// pooled embeddings skip to the loss (LayerProfile::skip_bytes).
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
#include "testing/timeline.h"

namespace remat {
namespace {

// all-MiniLM-L6-v2's shape, trained on `texts` texts per example, one
// pass per column.
ModelConfig MiniLm(int texts, int64_t micro_batch = 32) {
  return testing::MiniLmJob(texts, micro_batch, "false");
}

Profile Analytic(const ModelConfig& c) { return testing::AnalyticOnCpu(c); }
const LayerProfile& Named(const Profile& p, const std::string& name) {
  return testing::NamedLayer(p, name);
}

TEST(TextPasses, TripletsChainRepeatsTheEncoderPerPass) {
  const ModelConfig c = MiniLm(3);
  EXPECT_EQ(TextPasses(c), 3);
  const Profile p = Analytic(c);
  std::vector<std::string> names, kinds;
  for (const LayerProfile& l : p.layers) {
    names.push_back(l.name);
    kinds.push_back(l.kind);
  }
  std::vector<std::string> want_names, want_kinds;
  for (int pass = 1; pass <= 3; ++pass) {
    const std::string prefix = "p" + std::to_string(pass) + ".";
    want_names.push_back(prefix + "embedding");
    want_kinds.push_back(kEmbeddingKind);
    for (int b = 0; b < 6; ++b) {
      want_names.push_back(prefix + "block" + std::to_string(b));
      want_kinds.push_back(kBlockKind);
    }
    want_names.push_back(prefix + "head");
    want_kinds.push_back(kHeadKind);
  }
  want_names.push_back("loss");
  want_kinds.push_back(kLossKind);
  EXPECT_EQ(names, want_names);
  EXPECT_EQ(kinds, want_kinds);
  // Weights are shared across the passes: all-MiniLM-L6-v2 with its pooler.
  EXPECT_EQ(p.parameters, 22'713'216);
  EXPECT_EQ(ParameterCount(MiniLm(2)), 22'713'216);

  const int64_t b = 32, s = 75, h = 384;
  // x[0] is the batch of every text's ids (and targets, unused by mnrl);
  // the passes hand each other a 0-byte boundary (the next pass reads its
  // ids from the batch).
  EXPECT_EQ(p.layers[0].input_bytes, 2 * 3 * b * s * 8);
  EXPECT_EQ(Named(p, "p1.head").output_bytes, 0);
  EXPECT_EQ(Named(p, "p2.embedding").input_bytes, 0);
  EXPECT_EQ(Named(p, "p2.head").output_bytes, 0);
  EXPECT_EQ(Named(p, "p3.head").output_bytes, b * h * 4);
  EXPECT_EQ(Named(p, "loss").input_bytes, b * h * 4);
  // The first two passes' sentence embeddings skip to the loss.
  for (const LayerProfile& l : p.layers) {
    const bool skips = l.name == "p1.head" || l.name == "p2.head";
    EXPECT_EQ(l.skip_bytes, skips ? b * h * 4 : 0) << l.name;
  }
  // Every pass keeps the same: the ids they read are the batch (x[0]),
  // counted once.
  for (int blk = 0; blk < 6; ++blk) {
    const std::string name = "block" + std::to_string(blk);
    EXPECT_EQ(Named(p, "p1." + name).activation_bytes, Named(p, "p3." + name).activation_bytes);
    EXPECT_EQ(Named(p, "p2." + name).forward_workspace_bytes,
              Named(p, "p1." + name).forward_workspace_bytes);
  }
  EXPECT_EQ(Named(p, "p1.embedding").activation_bytes, Named(p, "p3.embedding").activation_bytes);
  EXPECT_EQ(Named(p, "p1.head").activation_bytes, Named(p, "p2.head").activation_bytes);
}

// One pass's block holds b texts: a third of what one pass of 3b texts
// (the model before separate passes, or any head with 3b sequences) keeps.
TEST(TextPasses, APassBlockHoldsOnePassOfTexts) {
  const Profile triplets = Analytic(MiniLm(3));
  ModelConfig one_pass = MiniLm(3, 96);
  one_pass.head = Head::kClassification;
  one_pass.loss = Loss::kDefault;
  one_pass.texts_per_example = 1;
  one_pass.pooler = false;
  EXPECT_EQ(TextPasses(one_pass), 1);
  const Profile single = Analytic(one_pass);
  EXPECT_EQ(Named(single, "block2").name, "block2");
  for (const char* field : {"activation", "forward_workspace"}) {
    const std::string f = field;
    auto get = [&](const LayerProfile& l) {
      return f == "activation" ? l.activation_bytes : l.forward_workspace_bytes;
    };
    EXPECT_EQ(3 * get(Named(triplets, "p2.block2")), get(Named(single, "block2"))) << f;
  }
}

// Under HF gradient checkpointing (every block), a recomputed block holds
// one pass's tensors: its recompute writes p<k>.block<j>'s activations, a
// third of the single 3b-text pass's, and the peak drops accordingly.
TEST(TextPasses, CheckpointedPassRecomputesOnePassOfTensors) {
  const Profile p = Analytic(MiniLm(3));
  std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
  for (int i : BlockLayers(p)) d[i] = LayerDecision::kCheckpoint;
  ASSERT_EQ(BlockLayers(p).size(), 18u);
  Result<Schedule> s = BuildSingleLevelSchedule(p, d, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  Result<SimulationResult> r = Simulate(p, *s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  int recomputes = 0;
  for (const TimelinePoint& t : r->timeline) {
    const Op& op = s->ops[t.op_index];
    if (op.kind != OpKind::kRecompute) continue;
    ++recomputes;
    const LayerProfile& l = p.layers[op.layer];
    EXPECT_EQ(t.at_peak[MemoryCategory::kRecomputed], l.activation_bytes) << l.name;
  }
  EXPECT_EQ(recomputes, 18);

  ModelConfig merged = MiniLm(3, 96);
  merged.head = Head::kClassification;
  merged.loss = Loss::kDefault;
  merged.texts_per_example = 1;
  merged.pooler = false;
  const Profile single = Analytic(merged);
  EXPECT_EQ(3 * Named(p, "p3.block5").activation_bytes, Named(single, "block5").activation_bytes);
}

// Three layers: pass 1 (keeps 40, skips 6 to the loss, hands on 0 bytes),
// pass 2 (keeps 30, x2 = 8), the loss (keeps 12, output 2). Model state 100.
Profile Passes() {
  Result<Profile> p = ParseProfile(R"({"model": "passes", "static_bytes": 100, "layers": [
      {"name": "p1", "forward_ms": 1, "backward_ms": 2, "input_bytes": 10, "output_bytes": 0,
       "activation_bytes": 40, "forward_workspace_bytes": 0, "backward_workspace_bytes": 0,
       "skip_bytes": 6},
      {"name": "p2", "forward_ms": 1, "backward_ms": 2, "input_bytes": 0, "output_bytes": 8,
       "activation_bytes": 30, "forward_workspace_bytes": 0, "backward_workspace_bytes": 0},
      {"name": "loss", "forward_ms": 1, "backward_ms": 2, "input_bytes": 8, "output_bytes": 2,
       "activation_bytes": 12, "forward_workspace_bytes": 0, "backward_workspace_bytes": 0}]})",
                                   "passes.json");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

using testing::Peaks;

TEST(TextPasses, SkipLivesUntilTheLossBackwardItsGradientUntilItsLayers) {
  const Profile p = Passes();
  ASSERT_TRUE(ValidateProfile(p, "passes").ok());
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Forward: 110 + a0 40 + skip 6 = 156; + a1 22 + x2 8 = 186; + a2 10 + x3 2 = 198.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{156, 186, 198}));
  // Loss backward: 198 + g2 8 + the skip's gradient 6 = 212; after it the
  // skip (6), x3, a2 and its input x2 go: 186. Pass 2's backward: 186 (g1
  // is 0 bytes), then a1, g2 go: 156. Pass 1's backward: 156, then its
  // skip's gradient goes.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{212, 186, 156}));
  EXPECT_EQ(r->peak_bytes, 212);
  EXPECT_EQ(s.ops[r->peak_op].layer, 2);
  EXPECT_EQ(r->at_peak[MemoryCategory::kActivations], 98);
  EXPECT_EQ(r->at_peak[MemoryCategory::kGradients], 14);
  // x0, a0, the skip and its gradient are pass 1's.
  EXPECT_EQ(r->layer_bytes_at_peak[0], 10 + 40 + 6 + 6);
  EXPECT_EQ(r->timeline.back().live_after, 100);
  for (const TimelinePoint& t : r->timeline) {
    if (s.ops[t.op_index].kind == OpKind::kBackward && s.ops[t.op_index].layer == 0) {
      // The skip's gradient freed after it, and a0 (what autograd saved,
      // released as the backward ran).
      EXPECT_EQ(t.live_after, t.peak - 6 - 40);
    }
  }
}

TEST(TextPasses, ARecomputeMakesTheSkipOnlyAsATransient) {
  const Profile p = Passes();
  const std::vector<LayerDecision> d = {LayerDecision::kCheckpoint, LayerDecision::kKeep,
                                        LayerDecision::kKeep};
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Pass 1 without grad: x1 (0) and the skip: 116; 146; 158.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{116, 146, 158}));
  // Loss backward 158 + 8 + 6 = 172 -> 146 after; pass 2: 146 -> 116;
  // pass 1's recompute keeps a0 (156) and makes its skip again as a
  // transient (162).
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{172, 146, 156}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kRecompute), (std::vector<int64_t>{162}));
  EXPECT_EQ(r->timeline.back().live_after, 100);
}

TEST(TextPasses, SkipBytesRoundTripAndStayOutOfOtherProfiles) {
  const Profile p = Passes();
  const std::string json = ProfileToJson(p);
  EXPECT_NE(json.find("\"skip_bytes\": 6"), std::string::npos) << json;
  Result<Profile> back = ParseProfile(json, "passes.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->layers[0].skip_bytes, 6);
  EXPECT_EQ(back->layers[1].skip_bytes, 0);
  // A one-pass model writes no skip_bytes at all (its profiles read as before).
  ModelConfig mlm = MiniLm(3);
  mlm.head = Head::kMlm;
  mlm.loss = Loss::kDefault;
  mlm.texts_per_example = 1;
  EXPECT_EQ(ProfileToJson(Analytic(mlm)).find("skip_bytes"), std::string::npos);
  std::string bad = json;
  bad.replace(bad.find("\"skip_bytes\": 6"), 15, "\"skip_bytes\": -6");
  Result<Profile> negative = ParseProfile(bad, "passes.json");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("skip_bytes"), std::string::npos)
      << negative.status().message();
}

// --checkpoint-layers and --selective-layers count one pass's blocks and
// apply to every pass (transformers checkpoints every call of a layer).
TEST(TextPasses, BlockListsApplyToEveryPass) {
  const Profile p = Analytic(MiniLm(3));
  const std::vector<std::vector<int>> passes = BlockLayersPerPass(p);
  ASSERT_EQ(passes.size(), 3u);
  for (const std::vector<int>& pass : passes) EXPECT_EQ(pass.size(), 6u);
  EXPECT_EQ(p.layers[passes[1][2]].name, "p2.block2");
  PlanOptions o;
  o.strategy = Strategy::kManual;
  o.checkpoint_layers = {0, 4};
  Result<Plan> manual = FindSolver(Strategy::kManual)->Solve(p, o);
  ASSERT_TRUE(manual.ok()) << manual.status().message();
  std::vector<std::string> checkpointed;
  for (int i = 0; i < p.num_layers(); ++i) {
    if (manual->decisions[i] == LayerDecision::kCheckpoint)
      checkpointed.push_back(p.layers[i].name);
  }
  EXPECT_EQ(checkpointed, (std::vector<std::string>{"p1.block0", "p1.block4", "p2.block0",
                                                    "p2.block4", "p3.block0", "p3.block4"}));
  o.checkpoint_layers = {6};
  Result<Plan> out_of_range = FindSolver(Strategy::kManual)->Solve(p, o);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("the model has 6 blocks (0-5)"), std::string::npos)
      << out_of_range.status().message();
  o.strategy = Strategy::kSelective;
  o.selective_layers = {1};
  Result<Plan> selective = FindSolver(Strategy::kSelective)->Solve(p, o);
  ASSERT_TRUE(selective.ok()) << selective.status().message();
  int chosen = 0;
  for (LayerDecision d : selective->decisions) chosen += d == LayerDecision::kSelective;
  EXPECT_EQ(chosen, 3);
  // One pass: the blocks as they are.
  EXPECT_EQ(BlockLayersPerPass(Passes()).size(), 1u);
}

}  // namespace
}  // namespace remat
