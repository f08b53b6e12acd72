// A tied token embedding's backward (analytic/encoder_blocks.cc Embedding):
// autograd holds the head's gradient of the shared weight and sums the
// embedding's dense V x h gradient into it out of place, so the backward
// holds the dense gradient and the sum, two V x h transients, where an
// untied embedding creates one gradient that stays. For every architecture
// whose head multiplies by the token embedding (gpt, llama, bert's mlm);
// none where the head does not (a pooling head) or the embedding does not
// train (LoRA).
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"

namespace remat {
namespace {

ModelConfig Tiny(Architecture architecture) {
  ModelConfig c;
  c.name = "tiny";
  c.architecture = architecture;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 4000;
  c.seq_len = 32;
  c.max_position = 64;
  c.micro_batch = 2;
  c.precision = Precision::kFp32;
  c.optimizer = Optimizer::kAdamW;
  c.tie_embeddings = true;
  return c;
}

const LayerProfile& Embedding(const Profile& p) {
  static const LayerProfile none;
  if (p.layers.empty()) return none;  // AnalyticProfile failed (a failure already)
  const std::string& name = p.layers.front().name;
  EXPECT_EQ(name.substr(name.size() - 9), "embedding");
  return p.layers.front();
}

Profile Analytic(const ModelConfig& c) {
  Result<Profile> p = AnalyticProfile(c, {});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

TEST(TiedEmbedding, TheBackwardHoldsTheDenseGradientAndTheOutOfPlaceSum) {
  for (Architecture a : {Architecture::kGpt, Architecture::kLlama, Architecture::kBert}) {
    SCOPED_TRACE(ToString(a));
    ModelConfig c = Tiny(a);
    const int64_t vh = c.vocab * c.hidden * 4;
    const Profile tied = Analytic(c);
    c.tie_embeddings = false;
    const Profile untied = Analytic(c);
    // Tied, the head creates the weight's gradient; untied, the embedding.
    EXPECT_EQ(Embedding(untied).gradient_bytes - Embedding(tied).gradient_bytes, vh);
    // The first micro-batch: the dense gradient and the sum, above the
    // gradient the head created; untied, the created gradient alone (its
    // workspace is the peak of another op of the layer: bert's LayerNorm).
    const int64_t more =
        Embedding(tied).backward_workspace_bytes - Embedding(untied).backward_workspace_bytes;
    EXPECT_GT(more, vh);
    EXPECT_LE(more, 2 * vh);
    if (a != Architecture::kBert) {
      EXPECT_EQ(Embedding(tied).backward_workspace_bytes,
                Embedding(untied).backward_workspace_bytes + 2 * vh);
    }
    // Micro-batches 2..K: untied, the dense gradient added into .grad in
    // place; tied, the sum besides.
    EXPECT_EQ(Embedding(tied).accumulating_workspace_bytes(),
              Embedding(untied).accumulating_workspace_bytes() + vh);
  }
}

TEST(TiedEmbedding, NoSumWhereTheHeadDoesNotShareTheWeightOrItDoesNotTrain) {
  ModelConfig pooling = Tiny(Architecture::kBert);
  pooling.head = Head::kPooling;
  const Profile shared = Analytic(pooling);
  pooling.tie_embeddings = false;
  const Profile apart = Analytic(pooling);
  EXPECT_EQ(Embedding(shared).backward_workspace_bytes, Embedding(apart).backward_workspace_bytes);
  EXPECT_EQ(Embedding(shared).gradient_bytes, Embedding(apart).gradient_bytes);

  ModelConfig lora = Tiny(Architecture::kLlama);
  lora.lora_rank = 8;
  EXPECT_EQ(Embedding(Analytic(lora)).backward_workspace_bytes, 0);
}

}  // namespace
}  // namespace remat
