// A tied token embedding's backward on the runtime (layer_execution.cc
// Backward): the head's gradient of the shared weight is held while the
// embedding's dense gradient is made, and the two are summed out of place,
// as autograd's input buffer sums them in a whole-model backward
// (transformers). Measured by the CPU meter against the analytic op model
// (analytic/encoder_blocks.cc Embedding), for every architecture whose head
// multiplies by the token embedding: the sum is a second V x h transient.
#include <gtest/gtest.h>

#include "cpu_profiles.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// The tiny models of every architecture with an LM head (tiny_model.h),
// their vocabulary raised so that V x h stands well above a block's tensors.
ModelConfig Tiny(Architecture architecture, bool tied) {
  ModelConfig c = architecture == Architecture::kLlama ? testing::TinyLlama()
                  : architecture == Architecture::kBert ? testing::TinyBert(Head::kMlm)
                                                        : testing::TinyGpt(2);
  c.vocab = 1024;
  c.attention = AttentionImpl::kEager;
  c.tie_embeddings = tied;
  return c;
}

TEST(TiedEmbedding, TheEmbeddingsBackwardHoldsTheSumAsTheAnalyticModelSays) {
  for (Architecture a : {Architecture::kLlama, Architecture::kGpt, Architecture::kBert}) {
    SCOPED_TRACE(ToString(a));
    Profile tied, tied_analytic, untied, untied_analytic;
    ASSERT_TRUE(testing::MeasuredAndAnalyticOnCpu(Tiny(a, true), &tied, &tied_analytic));
    ASSERT_TRUE(testing::MeasuredAndAnalyticOnCpu(Tiny(a, false), &untied, &untied_analytic));
    const LayerProfile &m = tied.layers.front(), &p = tied_analytic.layers.front();
    ASSERT_EQ(p.name, "embedding");
    const int64_t vh = int64_t{1024} * 32 * 4;  // V x h, fp32
    // Untied, the embedding's backward creates its gradient; tied, the
    // head created it and the embedding's makes the dense gradient and the
    // sum, both freed once the sum is .grad.
    const int64_t more = m.backward_workspace_bytes - untied.layers.front().backward_workspace_bytes;
    EXPECT_GT(more, vh);
    EXPECT_LE(more, 2 * vh);
    EXPECT_EQ(m.gradient_bytes, p.gradient_bytes);
    // The head creates the shared weight's gradient.
    const size_t head = tied.layers.size() - 2;
    ASSERT_EQ(tied_analytic.layers[head].name, "head");
    EXPECT_EQ(tied.layers[head].gradient_bytes, tied_analytic.layers[head].gradient_bytes);
    EXPECT_GE(tied.layers[head].gradient_bytes, vh);
    // To the byte where the embedding is the token lookup alone (llama);
    // gpt's and bert's learned positions (a few KiB here) are not the
    // subject.
    if (a == Architecture::kLlama) {
      EXPECT_EQ(more, 2 * vh);
      EXPECT_EQ(m.backward_workspace_bytes, p.backward_workspace_bytes);
      EXPECT_EQ(m.accumulating_workspace_bytes(), p.accumulating_workspace_bytes());
    }
  }
}

}  // namespace
}  // namespace remat::runtime
