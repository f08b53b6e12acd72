// Analytic GPT-2-small-shaped profiles (remat/analytic/analytic.h, the profiles
// `planner` builds from a model.json): embedding, `blocks` identical
// blocks, final norm, LM head, loss.
#ifndef REMAT_TESTS_TESTING_GPT_CHAIN_H_
#define REMAT_TESTS_TESTING_GPT_CHAIN_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"

namespace remat::testing {

// GPT-2 small's shape with `blocks` blocks: hidden 768, 12 heads, ffn 3072,
// vocab 50257, seq_len 1024; the rest ModelConfig's defaults.
inline ModelConfig Gpt2Shape(int blocks) {
  ModelConfig c;
  c.name = "gpt-" + std::to_string(blocks);
  c.layers = blocks;
  c.hidden = 768;
  c.heads = 12;
  c.ffn_hidden = 3072;
  c.vocab = 50257;
  c.seq_len = 1024;
  c.max_position = 1024;
  return c;
}

// Gpt2Shape at micro_batch, amp_bf16, a100 times. Aborts on an invalid
// configuration (a bug in the caller).
inline Profile GptChain(int blocks, int64_t micro_batch,
                        AttentionImpl attention = AttentionImpl::kEager) {
  ModelConfig c = Gpt2Shape(blocks);
  c.micro_batch = micro_batch;
  c.precision = Precision::kAmpBf16;
  c.attention = attention;
  AnalyticOptions o;
  o.device = LookupDevice("a100").value();
  Result<Profile> p = AnalyticProfile(c, o);
  if (!p.ok()) {
    std::fprintf(stderr, "GptChain: %s\n", p.status().message().c_str());
    std::abort();
  }
  return *p;
}

// One GPT block of the shapes Korthikanti et al. 2022 tabulate: seq_len
// 2048, micro_batch 1, ffn 4 * hidden, dropout 0.1 (the first block of a
// 1-layer chain).
inline ModelConfig GptLayerShape(int64_t hidden, int64_t heads, Precision precision,
                                 AttentionImpl attention) {
  ModelConfig c;
  c.name = "gpt-layer-" + std::to_string(hidden);
  c.architecture = Architecture::kGpt;
  c.layers = 1;
  c.hidden = hidden;
  c.heads = heads;
  c.ffn_hidden = 4 * hidden;
  c.vocab = 50257;
  c.seq_len = 2048;
  c.max_position = 2048;
  c.micro_batch = 1;
  c.precision = precision;
  c.attention = attention;
  c.dropout = 0.1;
  return c;
}

// Layer `l`'s selective option named `name`, or null when it has none.
inline const SelectiveOption* Option(const LayerProfile& l, const std::string& name) {
  for (const SelectiveOption& o : l.selective) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// The first "block" layer of `p` (an empty layer when it has none).
inline const LayerProfile& FirstBlock(const Profile& p) {
  for (const LayerProfile& l : p.layers) {
    if (l.kind == kBlockKind) return l;
  }
  static const LayerProfile none;
  return none;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_GPT_CHAIN_H_
