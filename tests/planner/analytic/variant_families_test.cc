// gemma2, gemma3, qwen3 and phi3 from their config.json: the variant fields,
// transformers' defaults, parameter counts equal to transformers' own
// (sum of p.numel() of AutoModelForCausalLM on the meta device; tests/python/
// hf_families_test.py checks them against transformers where it is
// installed), and what the variants keep for backward.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/profile/profile.h"
#include "testing/cpu_kept.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

using testing::Hf;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(REMAT_SOURCE_DIR) + "/examples/hf/" + name +
                   ".config.json");
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

std::string Error(const std::string& json) {
  Result<ModelConfig> c = ParseHfConfig(json, "config.json");
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : c.status().message();
}

int64_t Sliding(const ModelConfig& c) {
  int64_t n = 0;
  for (bool s : c.sliding_layers) n += s;
  return n;
}

TEST(VariantFamilies, GemmaTwo) {
  ModelConfig c = Hf(Fixture("gemma-2-2b"));
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);
  EXPECT_TRUE(c.gemma_norms);
  EXPECT_TRUE(c.embedding_scale);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 256);  // not hidden / heads = 288
  EXPECT_EQ(c.attn_softcap, 50.0);
  EXPECT_EQ(c.logit_softcap, 30.0);
  EXPECT_EQ(c.attention, AttentionImpl::kEager);  // Gemma2 has no SDPA
  EXPECT_EQ(c.sliding_window, 4096);
  ASSERT_EQ(c.sliding_layers.size(), 26u);
  EXPECT_TRUE(c.sliding_layers[0]);
  EXPECT_FALSE(c.sliding_layers[1]);
  EXPECT_EQ(Sliding(c), 13);
  EXPECT_EQ(ParameterCount(c), 2'614'341'888);
  // Every key absent takes Gemma2Config's default: the 2B model's shape.
  EXPECT_EQ(ParameterCount(Hf(R"({"model_type":"gemma2"})")), 2'614'341'888);
}

TEST(VariantFamilies, GemmaThree) {
  ModelConfig c = Hf(Fixture("gemma-3-1b"));
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.gemma_norms);
  EXPECT_EQ(c.attn_softcap, 0.0);
  EXPECT_EQ(c.logit_softcap, 0.0);
  EXPECT_EQ(c.attention, AttentionImpl::kSdpa);
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_EQ(c.sliding_window, 512);
  ASSERT_EQ(c.sliding_layers.size(), 26u);
  EXPECT_FALSE(c.sliding_layers[5]);  // every sixth layer is global
  EXPECT_EQ(Sliding(c), 22);
  EXPECT_EQ(c.precision, Precision::kAmpBf16);
  EXPECT_EQ(ParameterCount(c), 999'885'952);
  // gemma3 (the multimodal model): its text_config is the decoder, which is
  // all remat models (not the vision tower).
  const std::string text = Fixture("gemma-3-1b");
  ModelConfig wrapped = Hf(R"({"model_type":"gemma3",
      "architectures":["Gemma3ForConditionalGeneration"],"text_config":)" + text + "}");
  EXPECT_EQ(wrapped.head, Head::kLm);
  EXPECT_EQ(ParameterCount(wrapped), 999'885'952);
}

TEST(VariantFamilies, QwenThree) {
  ModelConfig c = Hf(Fixture("qwen3-8b"));
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.gemma_norms);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.activation, Activation::kSilu);
  EXPECT_TRUE(c.sliding_layers.empty());  // use_sliding_window false
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(ParameterCount(c), 8'190'735'360);
  // q_norm and k_norm: head_dim weights each, per layer.
  ModelConfig plain = c;
  plain.qk_norm = false;
  EXPECT_EQ(ParameterCount(c) - ParameterCount(plain), 36 * 2 * 128);
}

TEST(VariantFamilies, PhiThree) {
  ModelConfig c = Hf(Fixture("phi-3-mini-4k"));
  EXPECT_TRUE(c.fused_projections);
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.sliding_window, 2047);
  EXPECT_EQ(Sliding(c), 32);  // one sliding mask for every layer
  EXPECT_EQ(ParameterCount(c), 3'821'079'552);
  // The fused projections hold the weights of the separate ones.
  ModelConfig separate = c;
  separate.fused_projections = false;
  EXPECT_EQ(ParameterCount(separate), ParameterCount(c));
}

TEST(VariantFamilies, MixturesOfExperts) {
  ModelConfig mixtral = Hf(Fixture("mixtral-8x7b"));
  EXPECT_EQ(mixtral.experts, 8);
  EXPECT_EQ(mixtral.experts_per_token, 2);
  EXPECT_EQ(mixtral.head_dim, 128);  // head_dim absent: hidden / heads
  EXPECT_FALSE(mixtral.qk_norm);
  EXPECT_EQ(ParameterCount(mixtral), 46'702'792'704);
  ModelConfig qwen = Hf(Fixture("qwen3-30b-a3b"));
  EXPECT_EQ(qwen.experts, 128);
  EXPECT_EQ(qwen.experts_per_token, 8);
  EXPECT_EQ(qwen.expert_ffn_hidden, 768);
  EXPECT_TRUE(qwen.qk_norm);
  EXPECT_EQ(ParameterCount(qwen), 30'532'122'624);
  // Qwen3MoeConfig has no head_dim: without one, hidden / heads (not
  // qwen3's 128).
  EXPECT_EQ(Hf(R"({"model_type":"qwen3_moe"})").head_dim, 2048 / 32);
  EXPECT_EQ(Hf(R"({"model_type":"qwen3"})").head_dim, 128);
}

TEST(VariantFamilies, ModelJsonRoundTrip) {
  for (const char* name : {"gemma-2-2b", "gemma-3-1b", "qwen3-8b", "phi-3-mini-4k",
                           "mixtral-8x7b", "qwen3-30b-a3b"}) {
    const ModelConfig c = Hf(Fixture(name));
    Result<ModelConfig> back = ParseModelConfig(ModelConfigToJson(c), "model.json");
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().message();
    EXPECT_EQ(ModelConfigToJson(*back), ModelConfigToJson(c)) << name;
    EXPECT_EQ(ParameterCount(*back), ParameterCount(c)) << name;
  }
}

TEST(VariantFamilies, RefusedFields) {
  EXPECT_NE(Error(R"({"model_type":"qwen2_moe","vocab_size":32000})")
                .find("'model_type': \"qwen2_moe\" has mixture-of-experts blocks remat does "
                      "not model (it models mixtral's and qwen3_moe's); expected gpt2, llama"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"qwen3_moe","decoder_sparse_step":2})")
                .find("'decoder_sparse_step'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"qwen3_moe","mlp_only_layers":[0]})").find("'mlp_only_layers'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"mixtral","output_router_logits":true})")
                .find("'output_router_logits'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"mixtral","router_jitter_noise":0.01})")
                .find("'router_jitter_noise'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"mixtral","num_experts_per_tok":9})")
                .find("'num_experts_per_tok'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"gemma2","hidden_activation":"gelu"})")
                .find("'hidden_activation': unsupported value \"gelu\", expected silu or "
                      "gelu_pytorch_tanh"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"phi3","resid_pdrop":0.1})").find("'resid_pdrop'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"qwen3","attention_bias":true})").find("'attention_bias'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"gemma2","_attn_implementation":"sdpa"})")
                .find("'attn_softcap': scaled_dot_product_attention has no soft-capping"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"gemma2","num_hidden_layers":2,
      "layer_types":["full_attention"]})")
                .find("'layer_types'"),
            std::string::npos);
  EXPECT_NE(Error(R"({"model_type":"gemma3","text_config":3})").find("'text_config'"),
            std::string::npos);
  // The variant fields belong to the llama family.
  Result<ModelConfig> gpt = ParseModelConfig(
      R"({"architecture":"gpt","layers":2,"hidden":64,"heads":4,"vocab":100,"seq_len":16,
          "qk_norm":true})",
      "model.json");
  ASSERT_FALSE(gpt.ok());
  EXPECT_NE(gpt.status().message().find("field 'architecture'"), std::string::npos);
  Result<ModelConfig> topk = ParseModelConfig(
      R"({"architecture":"llama","layers":2,"hidden":64,"heads":4,"vocab":100,"seq_len":16,
          "experts":4,"experts_per_token":5})",
      "model.json");
  ASSERT_FALSE(topk.ok());
  EXPECT_NE(topk.status().message().find("field 'experts_per_token': 5: expected an integer in "
                                         "[1, experts = 4]"),
            std::string::npos);
}

// fp32, one block of a llama with grouped-query attention, on the CPU.
constexpr int64_t kH = 256, kA = 4, kKv = 2, kD = 64, kF = 688, kV = 1000, kS = 128, kB = 2;
ModelConfig Small(AttentionImpl attention) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.layers = 1;
  c.hidden = kH;
  c.heads = kA;
  c.kv_heads = kKv;
  c.head_dim = kD;
  c.ffn_hidden = kF;
  c.vocab = kV;
  c.seq_len = kS;
  c.micro_batch = kB;
  c.attention = attention;
  c.dropout = 0;
  c.tie_embeddings = false;
  return c;
}

int64_t Kept(const ModelConfig& c, const std::string& layer) {
  return testing::KeptOnCpu(c, layer);
}

// Each variant field against the block without it, per token in fp32.
TEST(VariantFamilies, WhatEachVariantKeeps) {
  const int64_t tokens = kS * kB;
  const ModelConfig eager = Small(AttentionImpl::kEager), sdpa = Small(AttentionImpl::kSdpa);
  // q_norm and k_norm (llama's RMSNorm, fp32): each keeps its input (the
  // projection, otherwise read only by the rotation), an rstd per head row
  // and the normalized rows.
  ModelConfig qk = sdpa;
  qk.qk_norm = true;
  EXPECT_EQ(Kept(qk, "block0") - Kept(sdpa, "block0"),
            tokens * 4 * (2 * kA * kD + kA + 2 * kKv * kD + kKv));
  // Gemma's norms: the two on the outputs keep their input, rstd and the
  // normalized rows; in fp32 the other two keep what llama's keep.
  ModelConfig gemma = sdpa;
  gemma.gemma_norms = true;
  EXPECT_EQ(Kept(gemma, "block0") - Kept(sdpa, "block0"), tokens * 2 * (8 * kH + 4));
  // Soft-capped scores (eager): tanh keeps its s x s output.
  ModelConfig capped = eager;
  capped.attn_softcap = 50;
  EXPECT_EQ(Kept(capped, "block0") - Kept(eager, "block0"), kA * kS * kS * kB * 4);
  // Soft-capped logits: one more logits-sized tensor at the head.
  ModelConfig logits = sdpa;
  logits.logit_softcap = 30;
  EXPECT_EQ(Kept(logits, "head") - Kept(sdpa, "head"), tokens * kV * 4);
  // Fused projections: v is a view of qkv, kept whole; gate_up kept whole
  // equals the separate gate and up.
  ModelConfig fused = sdpa;
  fused.fused_projections = true;
  EXPECT_EQ(Kept(fused, "block0") - Kept(sdpa, "block0"), tokens * 4 * (kA * kD + kKv * kD));
  // GeGLU keeps what SwiGLU keeps.
  ModelConfig geglu = sdpa;
  geglu.activation = Activation::kGeluTanh;
  EXPECT_EQ(Kept(geglu, "block0"), Kept(sdpa, "block0"));
  // A sliding layer: nothing below its window; at or past it, SDPA keeps
  // the float mask (b, 1, s, s) and k and v repeated to every head (no
  // enable_gqa with a mask) instead of the grouped ones.
  ModelConfig window = sdpa;
  window.sliding_window = kS + 1;
  window.sliding_layers = {true};
  EXPECT_EQ(Kept(window, "block0"), Kept(sdpa, "block0"));
  window.sliding_window = kS;
  EXPECT_EQ(Kept(window, "block0") - Kept(sdpa, "block0"),
            kB * kS * kS * 4 + tokens * 4 * 2 * (kA - kKv) * kD);
  // Experts (grouped_mm): each routed row keeps its gather index,
  // permutation and inverse (8 bytes each), its weight (4), its top-k index
  // (8) and the clone of its top-k value the in-place renormalization keeps
  // (4); the gathered input and the down output (4h each), the gate_up
  // output (8f), the activation and the product (4f each). The router keeps
  // fp32 probabilities, one per expert; nothing depends on how the router
  // balances the rows.
  ModelConfig moe = sdpa, moe_k2 = sdpa, moe_wide = sdpa;
  moe.experts = moe_k2.experts = 8;
  moe_wide.experts = 16;
  moe.experts_per_token = 1;
  moe_k2.experts_per_token = moe_wide.experts_per_token = 2;
  EXPECT_EQ(Kept(moe_k2, "block0") - Kept(moe, "block0"), tokens * (8 * kH + 16 * kF + 40));
  // Twice the experts: 8 more probabilities a token, 8 more group offsets.
  EXPECT_EQ(Kept(moe_wide, "block0") - Kept(moe_k2, "block0"), tokens * 4 * 8 + 8 * 4);
  // torch._grouped_mm is on no autocast list: under amp_bf16 the routed rows
  // stay fp32 (the residual stream's dtype), so each keeps what it keeps in
  // fp32 (measured: docs/model-families.md).
  moe.precision = moe_k2.precision = Precision::kAmpBf16;
  EXPECT_EQ(Kept(moe_k2, "block0") - Kept(moe, "block0"), tokens * (8 * kH + 16 * kF + 40));
  // One key/value head: repeat_kv's reshape is a view, only the mask is new.
  ModelConfig mqa = window, mqa_full = sdpa;
  mqa.kv_heads = mqa_full.kv_heads = 1;
  EXPECT_EQ(Kept(mqa, "block0") - Kept(mqa_full, "block0"), kB * kS * kS * 4);
}

// A mixture's selective options: the attention core, the experts and both
// (no MLP activation option: the runtime recomputes the experts as a whole).
// The experts drop what the dispatch, the experts and the combine keep (per
// routed row: the gather index, permutation and inverse, the weight, the
// gathered input and the down output, the gate_up output, the activation
// and the product; the groups' offsets) and keep the renormalized top-k weight (4 bytes a row)
// to make them again; they cost their forward again in backward.
TEST(VariantFamilies, ExpertsOptionRecomputesTheExpertsApartFromTheAttention) {
  ModelConfig moe = Small(AttentionImpl::kSdpa);
  moe.experts = 8;
  moe.experts_per_token = 2;
  AnalyticOptions o;
  o.device = *LookupDevice("cpu");
  Result<Profile> p = AnalyticProfile(moe, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = p->layers[1];
  ASSERT_EQ(block.selective.size(), 3u);
  EXPECT_EQ(block.selective[0].name, kAttentionCoreOption);
  EXPECT_EQ(block.selective[1].name, kExpertsOption);
  EXPECT_EQ(block.selective[2].name, kAttentionCoreExpertsOption);
  const int64_t rows = kS * kB * 2;
  // And the 8 experts' group offsets (int32), which both grouped GEMMs keep.
  EXPECT_EQ(block.activation_bytes - block.selective[1].activation_bytes,
            rows * (24 + 8 * kH + 16 * kF) + 8 * 4);
  EXPECT_EQ(block.selective[0].activation_bytes - block.selective[2].activation_bytes,
            rows * (24 + 8 * kH + 16 * kF) + 8 * 4);
  EXPECT_GT(block.selective[1].extra_recompute_ms, 0);
  EXPECT_GT(block.selective[2].extra_recompute_ms, block.selective[1].extra_recompute_ms);
  // With LoRA (the runtime recomputes nothing around adapters) the core only.
  moe.lora_rank = 8;
  p = AnalyticProfile(moe, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->layers[1].selective.size(), 1u);
}

}  // namespace
}  // namespace remat
