// What each SDPA kernel keeps, block by block, and where the kernel is
// reported (docs/analytic-model.md, "Which SDPA kernel").
#include <gtest/gtest.h>

#include <string>

#include "analytic/op_graph.h"
#include "analytic/transformer_graph.h"
#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/profile/profile.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

using analytic::BuildTransformerGraph;
using analytic::KernelDevice;
using analytic::OpInfo;
using analytic::SdpaDeviceFor;
using analytic::TransformerGraph;

using testing::Hf;

Profile OnDevice(const ModelConfig& c, const char* device) {
  AnalyticOptions o;
  o.device = *LookupDevice(device);
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

const LayerProfile& Block0(const Profile& p) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == "block0") return l;
  }
  static const LayerProfile none;
  ADD_FAILURE() << "no block0";
  return none;
}

// bench/fidelity/models/hf/llama-gqa-s.config.json's shape: 8 query heads, 2 kv heads.
ModelConfig LlamaGqaS() {
  ModelConfig c = Hf(R"({"architectures":["LlamaForCausalLM"],"model_type":"llama",
      "hidden_size":256,"intermediate_size":688,"num_hidden_layers":4,"num_attention_heads":8,
      "num_key_value_heads":2,"max_position_embeddings":512,"vocab_size":8000,
      "tie_word_embeddings":false})");
  c.seq_len = 256;
  c.micro_batch = 4;
  return c;
}

ModelConfig BertS(int64_t seq_len) {
  ModelConfig c = Hf(R"({"architectures":["BertForMaskedLM"],"model_type":"bert",
      "hidden_size":256,"intermediate_size":1024,"num_hidden_layers":4,"num_attention_heads":4,
      "max_position_embeddings":512,"type_vocab_size":2,"vocab_size":8000})");
  c.seq_len = seq_len;
  c.micro_batch = 8;
  return c;
}

// fp32 Llama with GQA: the CPU flash kernel keeps q, k and v unrepeated, the
// output and the logsumexp; on the H200 the math path keeps instead q and
// the repeated k scaled by sqrt(scale), the repeated v and the s x s fp32
// probabilities (no dropout). The output is kept either way (o_proj's input).
TEST(SdpaKept, Fp32GqaLlamaRunsTheMathPathOnTheH200) {
  const ModelConfig c = LlamaGqaS();
  const int64_t b = 4, s = 256, a = 8, kv = 2, d = 32, fp32 = 4;
  const int64_t q = b * s * a * d * fp32, kv_bytes = b * s * kv * d * fp32;
  const int64_t fused = q + 2 * kv_bytes + b * a * s * fp32;
  const int64_t math = 3 * q + b * a * s * s * fp32;
  const Profile cpu = OnDevice(c, "cpu"), h200 = OnDevice(c, "h200");
  EXPECT_EQ(Block0(cpu).attention_backend, "flash");
  EXPECT_EQ(Block0(h200).attention_backend, "math");
  EXPECT_EQ(Block0(cpu).activation_bytes, 20'226'048);  // unchanged (model_families_test)
  EXPECT_EQ(Block0(h200).activation_bytes - Block0(cpu).activation_bytes, math - fused);
  // In bf16 the H200 runs cuDNN (head_dim 32, no dropout): fused again.
  ModelConfig bf16 = c;
  bf16.precision = Precision::kAmpBf16;
  EXPECT_EQ(Block0(OnDevice(bf16, "h200")).attention_backend, "cudnn");
  EXPECT_EQ(Block0(OnDevice(bf16, "a100")).attention_backend, "flash");
}

// The efficient kernel pads each head's logsumexp to a multiple of 32 rows:
// at s = 75, 96 rows against the 75 of remat's own blockwise kernel.
TEST(SdpaKept, EfficientPadsTheLogsumexpTo32Rows) {
  ModelConfig sdpa = BertS(75);
  ModelConfig flash = sdpa;
  flash.attention = AttentionImpl::kFlash;
  const Profile e = OnDevice(sdpa, "h200"), f = OnDevice(flash, "h200");
  EXPECT_EQ(Block0(e).attention_backend, "efficient");
  EXPECT_EQ(Block0(f).attention_backend, "");  // not an SDPA call
  EXPECT_EQ(Block0(e).activation_bytes - Block0(f).activation_bytes, 8 * 4 * (96 - 75) * 4);
}

// FlashAttention-2's backward scratch: an fp32 dq accumulator (b, s rounded
// to 128, a, d rounded to 32) and softmax_d (b, a, s rounded to 128), the
// attention op's backward workspace; none for remat's own kernel.
int64_t AttentionBackwardWorkspace(const ModelConfig& c, const char* device) {
  KernelDevice kernels;
  kernels.cpu = std::string(device) == "cpu";
  kernels.sdpa = SdpaDeviceFor(device);
  Result<TransformerGraph> g = BuildTransformerGraph(c, kernels);
  EXPECT_TRUE(g.ok());
  if (!g.ok()) return -1;
  for (const OpInfo& op : g->graph.ops()) {
    if (op.name == "block0.flash_attention") return op.backward_workspace;
  }
  ADD_FAILURE() << "no fused attention op";
  return -1;
}

TEST(SdpaKept, CudaFlashBackwardAllocatesItsAccumulators) {
  ModelConfig sdpa = BertS(100);
  sdpa.precision = Precision::kAmpBf16;
  sdpa.dropout = 0.1;
  EXPECT_EQ(Block0(OnDevice(sdpa, "a100")).attention_backend, "flash");
  const int64_t b = 8, a = 4, s128 = 128, d32 = 64;
  EXPECT_EQ(AttentionBackwardWorkspace(sdpa, "a100"), b * s128 * a * d32 * 4 + b * a * s128 * 4);
  // The H200 runs cuDNN, whose backward scratch is not modeled.
  EXPECT_EQ(Block0(OnDevice(sdpa, "h200")).attention_backend, "cudnn");
  EXPECT_EQ(AttentionBackwardWorkspace(sdpa, "h200"), 0);
  ModelConfig own = sdpa;
  own.attention = AttentionImpl::kFlash;
  EXPECT_EQ(AttentionBackwardWorkspace(own, "a100"), 0);
  // GQA adds the k and v gradients of every query head (bf16).
  ModelConfig llama = LlamaGqaS();
  llama.precision = Precision::kAmpBf16;
  llama.dropout = 0.1;
  const int64_t lb = 4, ls = 256, la = 8, ld = 32;
  EXPECT_EQ(AttentionBackwardWorkspace(llama, "a100"),
            lb * ls * la * ld * 4 + lb * la * ls * 4 + 2 * lb * ls * la * ld * 2);
}

// The kernel travels with the profile JSON and is checked when read.
TEST(SdpaKept, TheKernelIsInTheProfileJsonAndChecked) {
  const Profile p = OnDevice(LlamaGqaS(), "h200");
  const std::string json = ProfileToJson(p);
  Result<Profile> back = ParseProfile(json, "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Block0(*back).attention_backend, "math");
  std::string bad = json;
  const std::string field = "\"attention_backend\": \"math\"";
  const size_t at = bad.find(field);
  ASSERT_NE(at, std::string::npos) << json.substr(0, 400);
  bad.replace(at, field.size(), "\"attention_backend\": \"fast\"");
  Result<Profile> rejected = ParseProfile(bad, "p.json");
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("attention_backend"), std::string::npos);
  EXPECT_NE(rejected.status().message().find("fast"), std::string::npos);
}

}  // namespace
}  // namespace remat
