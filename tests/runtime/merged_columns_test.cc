// The runtime's text passes with merged columns (model.json merge_columns,
// sentence-transformers 6's embed_columns): the anchors in one pass, the
// positives and negatives merged in a second of 2 b texts. Same texts, same
// weights: without dropout the loss equals that of one pass per column.
#include <gtest/gtest.h>

#include <vector>

#include "chain_model.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// One forward through the chain, layer by layer, as the executor chains
// them: a skipping head hands the next pass the empty boundary. Returns
// the loss; `head_rows`: the rows of each pass's head output.
at::Tensor LossOf(const ModelConfig& c, std::vector<int64_t>* head_rows) {
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 3);
  const at::Tensor batch = model->MakeBatch(3, 0);
  at::Tensor x = batch;
  std::vector<at::Tensor> skips;
  for (int i = 0; i < model->num_layers(); ++i) {
    const bool loss = model->layer_kind(i) == LayerKind::kLoss;
    at::Tensor y =
        model->Forward(i, x, batch, SeedsFor(3, 0, i), loss ? skips : std::vector<at::Tensor>{});
    if (model->layer_kind(i) == LayerKind::kHead) head_rows->push_back(y.size(0));
    if (model->skips_to_loss(i)) {
      skips.push_back(y);
      y = model->PassBoundary();
    }
    x = y;
  }
  return x;
}

TEST(MergedColumns, AnchorsThenCandidatesGiveTheLossOfOnePassPerColumn) {
  ModelConfig merged = testing::TinyBert(Head::kPooling);
  merged.dropout = 0;
  ASSERT_TRUE(merged.merge_columns);
  ASSERT_EQ(merged.texts_per_example, 3);
  ModelConfig separate = merged;
  separate.merge_columns = false;

  const std::unique_ptr<ChainModel> model = MakeChainModel(merged, at::Device(at::kCPU), 3);
  EXPECT_EQ(model->passes(), 2);
  const int per_pass = static_cast<int>(merged.layers) + 2;
  ASSERT_EQ(model->num_layers(), 2 * per_pass + 1);
  EXPECT_EQ(model->layer_name(per_pass), "p2.embedding");
  EXPECT_EQ(model->DescribeChain(),
            "2 passes of (embedding, " + std::to_string(merged.layers) + " blocks, head), loss");

  std::vector<int64_t> merged_rows, separate_rows;
  const at::Tensor a = LossOf(merged, &merged_rows);
  const at::Tensor b = LossOf(separate, &separate_rows);
  const int64_t n = merged.micro_batch;
  EXPECT_EQ(merged_rows, (std::vector<int64_t>{n, 2 * n}));
  EXPECT_EQ(separate_rows, (std::vector<int64_t>{n, n, n}));
  EXPECT_NEAR(a.item<double>(), b.item<double>(), 1e-5);
}

}  // namespace
}  // namespace remat::runtime
