// Every block's selective options, measured by the CPU meter on the
// runtime's models against the analytic op model's (fp32, dropout 0.1,
// eager and sdpa; gpt, llama with grouped keys and values, bert mlm, and
// bert mean pooling + mnrl, whose three text passes run two block sizes):
// what each option keeps and its forward's workspace, to the byte; what its
// recompute adds to the backward's peak, to the byte for the options without
// the attention core (the MLP activation's formula is in
// tests/planner/mlp_recompute_workspace_test.cc).
//
// Not compared (issue 14, open; measured on these models):
// - the recompute workspace of the options with the attention core: the op
//   model puts the core's recompute below the runtime's (gpt 262,144 B =
//   4 n h, llama 1,048,576 B; the encoders' core recomputes under their MLP
//   peak and agree);
// - llama's norm_output recompute: the runtime's is 512 B (4 h) above the
//   op model's 0, not yet derived;
// - the forward workspace of a decoder's core+mlp options but gpt eager's
//   (llama 260,096 B, gpt sdpa 61,440 B above the op model's).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memory_meter.h"
#include "profiler.h"
#include "remat/analytic.h"
#include "remat/model_config.h"
#include "remat/profile.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// bench/models/cpu-s.json: width 128 (4 heads; ffn 512, llama 256 with 2 key/value heads), 128
// tokens x 4 sequences, 2 blocks: large enough that each option's recompute
// peaks above the layer's gradients and input gradient (the tiny models'
// backward stays below them, and the profile clamps that at 0).
ModelConfig Small(ModelConfig c, AttentionImpl attention) {
  c.layers = 2;
  c.hidden = 128;
  c.ffn_hidden = c.architecture == Architecture::kLlama ? 256 : 512;
  c.head_dim = c.hidden / c.heads;
  c.vocab = 2048;
  c.seq_len = 128;
  c.max_position = c.architecture == Architecture::kBert ? 130 : 128;
  c.micro_batch = 4;
  c.attention = attention;
  return c;
}

struct Case {
  std::string name;
  ModelConfig config;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (AttentionImpl a : {AttentionImpl::kEager, AttentionImpl::kSdpa}) {
    const std::string suffix = a == AttentionImpl::kEager ? "_eager" : "_sdpa";
    out.push_back({"gpt" + suffix, Small(testing::TinyGpt(), a)});
    out.push_back({"llama_gqa" + suffix, Small(testing::TinyLlama(), a)});
    out.push_back({"bert_mlm" + suffix, Small(testing::TinyBert(Head::kMlm), a)});
    out.push_back({"bert_mean_mnrl" + suffix, Small(testing::TinyBert(Head::kPooling), a)});
  }
  return out;
}

bool HasCore(const SelectiveOption& o) {
  return o.name.find(kAttentionCoreOption) != std::string::npos;
}

class SelectiveWorkspace : public ::testing::TestWithParam<Case> {};

TEST_P(SelectiveWorkspace, EveryOptionIsTheAnalyticModels) {
  const ModelConfig& c = GetParam().config;
  ASSERT_GT(c.dropout, 0);
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 1;
  Result<Profile> measured = MeasureProfile(c, o, Timing{}, CpuMeter());
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  AnalyticOptions cpu;
  Result<DeviceSpec> device = LookupDevice("cpu");
  ASSERT_TRUE(device.ok());
  cpu.device = *device;
  Result<Profile> analytic = AnalyticProfile(c, cpu);
  ASSERT_TRUE(analytic.ok()) << analytic.status().message();
  ASSERT_EQ(measured->num_layers(), analytic->num_layers());
  int exact = 0;
  for (int i = 0; i < analytic->num_layers(); ++i) {
    const LayerProfile &m = measured->layers[i], &a = analytic->layers[i];
    if (a.kind != kBlockKind) continue;
    ASSERT_EQ(m.selective.size(), a.selective.size()) << a.name;
    for (size_t k = 0; k < a.selective.size(); ++k) {
      const SelectiveOption &ms = m.selective[k], &as = a.selective[k];
      ASSERT_EQ(ms.name, as.name) << a.name;
      EXPECT_EQ(ms.activation_bytes, as.activation_bytes) << a.name << " " << as.name;
      const bool llama = c.architecture == Architecture::kLlama;
      const bool decoder_core_mlp =
          c.architecture != Architecture::kBert && HasCore(as) &&
          as.name.find(kMlpActivationOption) != std::string::npos &&
          (llama || c.attention != AttentionImpl::kEager);
      if (!decoder_core_mlp) {
        EXPECT_EQ(ms.forward_workspace_bytes, as.forward_workspace_bytes)
            << a.name << " " << as.name;
      }
      if (HasCore(as) || (llama && as.name == kNormOutputOption)) continue;
      EXPECT_EQ(ms.recompute_workspace_bytes, as.recompute_workspace_bytes)
          << a.name << " " << as.name;
      exact += as.recompute_workspace_bytes > 0;
    }
  }
  // mlp_activation in every block (and dropout_mask in a decoder's) adds
  // to the peak: the comparisons above are not all of zeros.
  EXPECT_GE(exact, 2);
}

INSTANTIATE_TEST_SUITE_P(Families, SelectiveWorkspace, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace remat::runtime
