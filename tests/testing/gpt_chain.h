// Analytic GPT-2-small-shaped profiles (remat/analytic.h, the profiles
// `planner` builds from a model.json): embedding, `blocks` identical
// blocks, final norm, LM head, loss.
#ifndef REMAT_TESTS_TESTING_GPT_CHAIN_H_
#define REMAT_TESTS_TESTING_GPT_CHAIN_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "remat/analytic.h"
#include "remat/model_config.h"
#include "remat/profile.h"

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

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_GPT_CHAIN_H_
