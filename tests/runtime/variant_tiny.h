// Small configurations of the llama family's variants (gemma2, gemma3,
// qwen3, phi3, mixtral, qwen3_moe) for runtime tests: VariantBase's shape
// (4 blocks, hidden 64, 64 tokens x 2 sequences, vocabulary 256, fp32) with
// each family's fields as its config.json reader sets them
// (docs/model-families.md), windows shorter than the sequence; the plain
// llama of that shape first, to compare with.
#ifndef REMAT_TESTS_RUNTIME_VARIANT_TINY_H_
#define REMAT_TESTS_RUNTIME_VARIANT_TINY_H_

#include <string>
#include <utility>
#include <vector>

#include "remat/model/model_config.h"
#include "tiny_model.h"

namespace remat::testing {

// TinyLlama widened to hidden 64 (4 heads, 2 key/value heads), 64 tokens x
// 2 sequences, vocabulary 256, without dropout: the shape every variant
// below starts from.
inline ModelConfig VariantBase() {
  ModelConfig c = TinyLlama();
  c.hidden = 64;
  c.ffn_hidden = 128;
  c.seq_len = 64;
  c.max_position = 64;
  c.vocab = 256;
  c.dropout = 0;
  c.attention = AttentionImpl::kSdpa;
  return c;
}

// Gemma 2: Gemma's norms, GeGLU, scaled and tied embeddings, soft-capped
// scores (eager) and logits, heads wider than hidden / heads, every second
// layer sliding (window 32 < 64 tokens).
inline ModelConfig TinyGemma2() {
  ModelConfig c = VariantBase();
  c.name = "tiny-gemma2";
  c.attention = AttentionImpl::kEager;
  c.head_dim = 32;
  c.activation = Activation::kGeluTanh;
  c.gemma_norms = true;
  c.embedding_scale = true;
  c.tie_embeddings = true;
  c.attn_softcap = 50;
  c.logit_softcap = 30;
  c.sliding_window = 32;
  c.sliding_layers = {true, false, true, false};
  return c;
}

// Gemma 3: Gemma 2 with q/k norms and SDPA, no soft-capping, the last
// layer full.
inline ModelConfig TinyGemma3() {
  ModelConfig c = TinyGemma2();
  c.name = "tiny-gemma3";
  c.attention = AttentionImpl::kSdpa;
  c.qk_norm = true;
  c.attn_softcap = 0;
  c.logit_softcap = 0;
  c.sliding_layers = {true, true, true, false};
  return c;
}

// Qwen3: q/k norms over grouped-query heads.
inline ModelConfig TinyQwen3() {
  ModelConfig c = VariantBase();
  c.name = "tiny-qwen3";
  c.qk_norm = true;
  return c;
}

// Phi-3: fused qkv_proj and gate_up_proj.
inline ModelConfig TinyPhi3() {
  ModelConfig c = VariantBase();
  c.name = "tiny-phi3";
  c.fused_projections = true;
  return c;
}

// Mixtral: 4 experts of width 128, top-2.
inline ModelConfig TinyMixtral() {
  ModelConfig c = VariantBase();
  c.name = "tiny-mixtral";
  c.experts = 4;
  c.experts_per_token = 2;
  return c;
}

// Qwen3-MoE: 8 experts of width 48, top-4, q/k norms.
inline ModelConfig TinyQwen3Moe() {
  ModelConfig c = TinyQwen3();
  c.name = "tiny-qwen3-moe";
  c.experts = 8;
  c.experts_per_token = 4;
  c.expert_ffn_hidden = 48;
  return c;
}

// llama (VariantBase), then each variant.
inline std::vector<std::pair<std::string, ModelConfig>> TinyVariantFamilies() {
  return {{"llama", VariantBase()}, {"gemma2", TinyGemma2()}, {"gemma3", TinyGemma3()},   {"qwen3", TinyQwen3()},
          {"phi3", TinyPhi3()},     {"mixtral", TinyMixtral()}, {"qwen3_moe", TinyQwen3Moe()}};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_VARIANT_TINY_H_
