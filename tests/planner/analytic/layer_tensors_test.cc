// LayerTensors: an analytic layer's figures as the tensors behind them, for
// the caching allocator's replay. Each list adds up to its figure exactly,
// so the replay's allocated bytes are the simulator's.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "analytic/chain.h"
#include "remat/analytic/analytic.h"
#include "remat/profile/profile.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

int64_t Sum(const TensorSizes& t) { return std::accumulate(t.begin(), t.end(), int64_t{0}); }

// Every list of every layer adds up to its figure (an empty list to a
// figure of 0 or to one request: a list of one tensor is the figure).
void ExpectListsAddUp(const Profile& p) {
  for (const LayerProfile& l : p.layers) {
    const std::string where = p.model + " " + l.name;
    EXPECT_EQ(Sum(l.tensors.saved), l.activation_bytes - l.output_bytes) << where;
    EXPECT_EQ(Sum(l.tensors.forward_workspace), l.forward_workspace_bytes) << where;
    EXPECT_EQ(Sum(l.tensors.nograd_workspace), l.nograd_workspace_bytes()) << where;
    EXPECT_EQ(Sum(l.tensors.backward_workspace), std::max<int64_t>(0, l.backward_workspace_bytes))
        << where;
    if (l.accumulate_workspace_bytes >= 0) {
      EXPECT_EQ(Sum(l.tensors.accumulate_workspace),
                std::max<int64_t>(0, l.accumulate_workspace_bytes))
          << where;
    }
    if (!l.tensors.gradients.empty() && l.kind == kBlockKind) {
      EXPECT_EQ(Sum(l.tensors.gradients), l.gradient_bytes) << where;
    }
    for (size_t k = 0; k < l.selective.size(); ++k) {
      const SelectiveOption& o = l.selective[k];
      EXPECT_EQ(Sum(o.saved_tensors), o.activation_bytes - l.output_bytes)
          << where << " " << o.name;
      EXPECT_EQ(Sum(o.forward_workspace_tensors), l.forward_workspace_for(static_cast<int>(k)))
          << where << " " << o.name;
    }
  }
}

TEST(LayerTensors, EveryListAddsUpToItsFigure) {
  for (AttentionImpl attention : {AttentionImpl::kEager, AttentionImpl::kSdpa}) {
    ExpectListsAddUp(testing::GptChain(2, 4, attention));
  }
  ModelConfig bf16 = testing::GptLayerShape(1024, 16, Precision::kBf16, AttentionImpl::kEager);
  bf16.grad_accumulation = 4;
  AnalyticOptions h200;
  h200.device = LookupDevice("h200").value();
  ExpectListsAddUp(AnalyticProfile(bf16, h200).value());
}

// A block keeps many tensors, each its own allocation; its parameter
// gradients are one per projection and norm (weight and bias together).
TEST(LayerTensors, ABlockIsManyTensors) {
  const Profile p = testing::GptChain(2, 4);
  const LayerProfile& block = testing::FirstBlock(p);
  EXPECT_GT(block.tensors.saved.size(), 10u);
  // GPT-2's block: two LayerNorms and four linears.
  EXPECT_EQ(block.tensors.gradients.size(), 6u);
  EXPECT_GT(block.tensors.backward_workspace.size(), 1u);
}

// FitTensors cuts the list where it passes the total and adds what is
// missing as one more tensor.
TEST(LayerTensors, FitTensorsMatchesTheTotal) {
  using analytic::FitTensors;
  EXPECT_EQ(FitTensors({4, 3, 2}, 9), (TensorSizes{4, 3, 2}));
  EXPECT_EQ(FitTensors({4, 3, 2}, 5), (TensorSizes{4, 1}));
  EXPECT_EQ(FitTensors({4, 3}, 10), (TensorSizes{4, 3, 3}));
  EXPECT_EQ(FitTensors({4, 3}, 0), TensorSizes{});
  EXPECT_EQ(FitTensors({4, 3}, -2), TensorSizes{});
  EXPECT_EQ(FitTensors({}, 6), (TensorSizes{6}));
  EXPECT_EQ(FitTensors({0, 5}, 5), (TensorSizes{5}));
}

}  // namespace
}  // namespace remat
