// Tiny configurations of every architecture and head, and schedules, for
// runtime tests (seconds on 2 cores).
#ifndef REMAT_TESTS_RUNTIME_TINY_MODEL_H_
#define REMAT_TESTS_RUNTIME_TINY_MODEL_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/strategies/strategies.h"

namespace remat::testing {

// 4 blocks, hidden 32, 4 heads, 16 tokens x 2 sequences, vocabulary 64,
// fp32, dropout 0.1: an 8-layer chain.
inline ModelConfig TinyGpt(int blocks = 4) {
  ModelConfig c;
  c.name = "tiny-gpt";
  c.layers = blocks;
  c.hidden = 32;
  c.heads = 4;
  c.ffn_hidden = 128;
  c.vocab = 64;
  c.seq_len = 16;
  c.max_position = 16;
  c.micro_batch = 2;
  c.precision = Precision::kFp32;
  c.dropout = 0.1;
  return c;
}

// TinyGpt's shape as a llama: grouped-query attention (4 heads, 2 key/value
// heads of width 8), SwiGLU width 64, untied LM head.
inline ModelConfig TinyLlama() {
  ModelConfig c = TinyGpt();
  c.name = "tiny-llama";
  c.architecture = Architecture::kLlama;
  c.kv_heads = 2;
  c.ffn_hidden = 64;
  c.tie_embeddings = false;
  return c;
}

// A qwen2-like llama: q/k/v biases, heads wider than hidden / heads (4 x 16
// over hidden 32), one key/value head, tied embeddings.
inline ModelConfig TinyQwen2() {
  ModelConfig c = TinyLlama();
  c.name = "tiny-qwen2";
  c.kv_heads = 1;
  c.head_dim = 16;
  c.qkv_bias = true;
  c.tie_embeddings = true;
  return c;
}

// TinyGpt's shape as a bert encoder with `head`: two token types, a
// position table longer than the sequence. pooling: mean over the tokens,
// mnrl on triplets (6 texts through the encoder) and an unused pooler;
// classification: 3 labels.
inline ModelConfig TinyBert(Head head) {
  ModelConfig c = TinyGpt();
  c.name = std::string("tiny-bert-") + ToString(head);
  c.architecture = Architecture::kBert;
  c.max_position = 18;
  c.type_vocab = 2;
  c.head = head;
  if (head == Head::kPooling) {
    c.texts_per_example = 3;
    c.pooler = true;
  }
  if (head == Head::kClassification) c.num_labels = 3;
  return WithDefaults(c);
}

// A distilroberta-like encoder: no token types, CLS pooling, mnrl on pairs.
inline ModelConfig TinyDistilCls() {
  ModelConfig c = TinyBert(Head::kPooling);
  c.name = "tiny-distil-cls";
  c.type_vocab = 0;
  c.pooling = Pooling::kCls;
  c.texts_per_example = 2;
  c.pooler = false;
  return c;
}

// Every tiny family above, named for test names.
inline std::vector<std::pair<std::string, ModelConfig>> TinyFamilies() {
  return {{"gpt", TinyGpt()},
          {"llama_gqa", TinyLlama()},
          {"qwen2_bias", TinyQwen2()},
          {"bert_mlm", TinyBert(Head::kMlm)},
          {"bert_mean_mnrl", TinyBert(Head::kPooling)},
          {"bert_classification", TinyBert(Head::kClassification)},
          {"distil_cls_mnrl", TinyDistilCls()}};
}

// The analytic profile of `c` (layer names and selective options are what
// schedules need).
inline Profile AnalyticOf(const ModelConfig& c) {
  Result<Profile> p = AnalyticProfile(c, AnalyticOptions{});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

// The planner's schedule for a strategy (no budget: default parameters).
inline Schedule PlannerSchedule(const Profile& p, Strategy s,
                                std::vector<int> checkpoint_layers = {}) {
  PlanOptions o;
  o.strategy = s;
  o.checkpoint_layers = std::move(checkpoint_layers);
  Result<PlanSet> plans = MakePlan(p, o);
  EXPECT_TRUE(plans.ok()) << plans.status().message();
  return plans.ok() ? plans->chosen.schedule : Schedule{};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_TINY_MODEL_H_
