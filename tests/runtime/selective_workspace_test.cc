// Every block's selective options, measured by the CPU meter on the
// runtime's models against the analytic op model's (fp32, dropout 0.1,
// eager and sdpa; gpt, llama with grouped keys and values, bert mlm, and
// bert mean pooling + mnrl, whose three text passes run two block sizes):
// what each option keeps and its forward's workspace, to the byte; what its
// recompute adds to the backward's peak (every part made again when the
// backward starts, in forward order), to the byte for every option but
// llama eager's with the attention core (the MLP activation's formula is
// in tests/planner/analytic/recompute_workspace_test.cc).
//
// A decoder's full backward workspace is 4 n h above the runtime's (the
// second residual's gradient, below); the recompute workspace is the
// option's peak less the full one's, and the option's peak carries the
// same 4 n h (4 n h = 262,144 B a block of 512 tokens here). Open:
// - llama eager, options with the attention core: the runtime's recompute
//   workspace is 4 n h above the op model's, a difference not derived;
// - not compared: the forward workspace of a decoder's core+mlp options but
//   gpt eager's (llama 260,096 B, gpt sdpa 61,440 B above the op model's).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "cpu_profiles.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// bench/fidelity/models/cpu-s.json's shape with 2 blocks: width 128 (4 heads; ffn
// 512, llama's 256 with 2 key/value heads), 128 tokens x 4 sequences. The
// tiny models' backward stays below the layer's gradients and input
// gradient, which the profile clamps at 0 on both sides; here each option's
// recompute peaks above them.
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

// gpt, llama with grouped keys and values, bert mlm and bert mean pooling
// + mnrl, each with eager and with sdpa attention ("gpt_eager", ...).
std::vector<std::pair<std::string, ModelConfig>> Cases() {
  const std::pair<std::string, ModelConfig> families[] = {
      {"gpt", testing::TinyGpt()},
      {"llama_gqa", testing::TinyLlama()},
      {"bert_mlm", testing::TinyBert(Head::kMlm)},
      {"bert_mean_mnrl", testing::TinyBert(Head::kPooling)}};
  std::vector<std::pair<std::string, ModelConfig>> out;
  for (AttentionImpl a : {AttentionImpl::kEager, AttentionImpl::kSdpa}) {
    for (const auto& [name, c] : families) {
      out.emplace_back(name + "_" + ToString(a), Small(c, a));
    }
  }
  return out;
}

bool HasCore(const SelectiveOption& o) {
  return o.name.find(kAttentionCoreOption) != std::string::npos;
}

class SelectiveWorkspace
    : public ::testing::TestWithParam<std::pair<std::string, ModelConfig>> {};

TEST_P(SelectiveWorkspace, EveryOptionIsTheAnalyticModels) {
  const ModelConfig& c = GetParam().second;
  ASSERT_GT(c.dropout, 0);
  Profile measured, analytic;
  ASSERT_TRUE(testing::MeasuredAndAnalyticOnCpu(c, &measured, &analytic));
  int exact = 0;
  for (int i = 0; i < analytic.num_layers(); ++i) {
    const LayerProfile &m = measured.layers[i], &a = analytic.layers[i];
    if (a.kind != kBlockKind) continue;
    ASSERT_EQ(m.selective.size(), a.selective.size()) << a.name;
    // A decoder's full backward peaks in fc2's, before ln2's: there the op
    // model holds two gradients of the second residual's output (one for
    // each input) where autograd hands its one tensor to both (until ln2's
    // backward adds into the stream's): 4 n h above the runtime's.
    const int64_t nh4 = a.input_bytes;  // 4 n h: fp32
    const bool decoder = c.architecture != Architecture::kBert;
    EXPECT_EQ(a.backward_workspace_bytes, m.backward_workspace_bytes + (decoder ? nh4 : 0))
        << a.name;
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
      // The runtime's recompute workspace less the op model's (above).
      const int64_t open =
          HasCore(as) && llama && c.attention == AttentionImpl::kEager ? nh4 : 0;
      EXPECT_EQ(ms.recompute_workspace_bytes, as.recompute_workspace_bytes + open)
          << a.name << " " << as.name;
      exact += as.recompute_workspace_bytes > 0;
    }
  }
  // mlp_activation in every block (and dropout_mask in a decoder's) adds
  // to the peak: the comparisons above are not all of zeros.
  EXPECT_GE(exact, 2);
}

INSTANTIATE_TEST_SUITE_P(Families, SelectiveWorkspace, ::testing::ValuesIn(Cases()),
                         [](const auto& i) { return i.param.first; });

}  // namespace
}  // namespace remat::runtime
