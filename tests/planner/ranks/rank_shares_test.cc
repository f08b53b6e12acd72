// The share of GPT-2 small each tensor- and pipeline-parallel rank holds,
// counted by hand from its modules.
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "remat/io/io.h"
#include "remat/ranks/rank_memory.h"

namespace remat {
namespace {

ModelConfig Gpt2Small() {
  const std::string path = std::string(REMAT_SOURCE_DIR) + "/examples/gpt2-small.json";
  Result<std::string> text = ReadTextFile(path);
  EXPECT_TRUE(text.ok()) << text.status().message();
  Result<ModelConfig> c = ParseModelConfig(*text, path);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

// GPT-2 small's modules: wte 50257 x 768, wpe 1024 x 768; a block's two
// LayerNorms (2 x 1536) and four linears with biases (c_attn 768 x 2304,
// attn c_proj 768 x 768, c_fc 768 x 3072, mlp c_proj 3072 x 768); ln_f.
constexpr int64_t kEmbedding = (50257 + 1024) * 768;
constexpr int64_t kNorms = 2 * 1536;
constexpr int64_t kLinears =
    (768 * 2304 + 2304) + (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768);
constexpr int64_t kBlock = kNorms + kLinears;

TEST(RankShares, OneRankHoldsTheModel) {
  Parallelism p;
  Result<std::vector<RankShare>> s = RankShares(Gpt2Small(), p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].parameters, 124'439'808);
  EXPECT_EQ((*s)[0].parameters, kEmbedding + 12 * kBlock + 1536);
  EXPECT_EQ((*s)[0].block_parameters, kBlock);
  EXPECT_EQ((*s)[0].root_parameters, kEmbedding + 1536);
}

TEST(RankShares, PersistentParametersAreThoseUnderTheThreshold) {
  // DeepSpeed's default 1e5 elements: the LayerNorms (weight and bias, 1,536
  // each) are under it, every linear and embedding above.
  Parallelism p;
  p.gpus = 2;
  p.data = DataParallel::kZero3;
  Result<std::vector<RankShare>> s = RankShares(Gpt2Small(), p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)[0].persistent_parameters, 12 * kNorms + 1536);
  EXPECT_EQ((*s)[0].block_persistent, kNorms);
  EXPECT_EQ((*s)[0].root_persistent, 1536);
  p.persistence_threshold = 0;
  s = RankShares(Gpt2Small(), p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)[0].persistent_parameters, 0);
}

TEST(RankShares, TensorParallelismSplitsLinearsAndEmbeddingKeepsNorms) {
  Parallelism p;
  p.gpus = 2;
  p.tensor = 2;
  Result<std::vector<RankShare>> s = RankShares(Gpt2Small(), p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)[0].block_parameters, kNorms + kLinears / 2);
  EXPECT_EQ((*s)[0].parameters, kEmbedding / 2 + 12 * (kNorms + kLinears / 2) + 1536);
}

TEST(RankShares, PipelineStagesSplitTheBlocksAndTheLastHoldsTheTiedEmbedding) {
  Parallelism p;
  p.gpus = 2;
  p.pipeline = 2;
  Result<std::vector<RankShare>> s = RankShares(Gpt2Small(), p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].parameters, kEmbedding + 6 * kBlock);
  EXPECT_EQ((*s)[1].parameters, 6 * kBlock + 1536 + 50257 * 768);
  EXPECT_EQ((*s)[0].layers.front(), "embedding");
  EXPECT_EQ((*s)[0].layers.back(), "block5");
  EXPECT_EQ((*s)[1].layers.front(), "block6");
  EXPECT_EQ((*s)[1].layers.back(), "loss");
}

TEST(PipelineBlocks, UnevenCountsGiveTheFirstStagesOneMore) {
  EXPECT_EQ(PipelineBlocks(10, 4, 0).end - PipelineBlocks(10, 4, 0).first, 3);
  EXPECT_EQ(PipelineBlocks(10, 4, 1).first, 3);
  EXPECT_EQ(PipelineBlocks(10, 4, 2).first, 6);
  EXPECT_EQ(PipelineBlocks(10, 4, 3).first, 8);
  EXPECT_EQ(PipelineBlocks(10, 4, 3).end, 10);
}

TEST(ValidateParallelism, RefusesWhatCannotRunTheModel) {
  const ModelConfig c = Gpt2Small();  // 12 heads, 12 blocks
  Parallelism p;
  p.gpus = 6;
  p.tensor = 4;
  EXPECT_NE(ValidateParallelism(p, c, "m").message().find("not a multiple of --tp x --pp"),
            std::string::npos);
  p.gpus = 8;
  p.tensor = 8;
  EXPECT_NE(ValidateParallelism(p, c, "m").message().find("must divide the attention heads (12)"),
            std::string::npos);
  p.tensor = 1;
  p.pipeline = 16;
  p.gpus = 16;
  EXPECT_NE(ValidateParallelism(p, c, "m").message().find("more pipeline stages than"),
            std::string::npos);
  p.pipeline = 5;  // uneven: 3, 3, 2, 2, 2 blocks
  p.gpus = 5;
  EXPECT_TRUE(ValidateParallelism(p, c, "m").ok());
}

TEST(ValidateParallelism, GqaKeyValueHeadsMustSplitToo) {
  ModelConfig c = Gpt2Small();
  c.architecture = Architecture::kLlama;
  c.kv_heads = 4;
  Parallelism p;
  p.gpus = 6;
  p.tensor = 6;
  EXPECT_NE(ValidateParallelism(p, c, "m").message().find("key/value heads (4)"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
