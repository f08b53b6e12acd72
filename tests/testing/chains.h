// Profiles for tests and benchmarks: hand-made and generated chains.
#ifndef REMAT_TESTS_TESTING_CHAINS_H_
#define REMAT_TESTS_TESTING_CHAINS_H_

#include <cstdint>
#include <random>
#include <string>

#include "remat/profile/profile.h"

namespace remat::testing {

// n identical layers: input/output `x` bytes, activation `a` bytes (output
// included), forward 1 ms, backward 2 ms, no workspaces, no model state.
inline Profile UniformChain(int n, int64_t x = 10, int64_t a = 30, double fwd = 1.0,
                            double bwd = 2.0) {
  Profile p;
  p.model = "uniform" + std::to_string(n);
  p.source = "test";
  for (int i = 0; i < n; ++i) {
    LayerProfile l;
    l.name = "l" + std::to_string(i);
    l.kind = "block";
    l.forward_ms = fwd;
    l.backward_ms = bwd;
    l.input_bytes = x;
    l.output_bytes = x;
    l.activation_bytes = a;
    p.layers.push_back(l);
  }
  return p;
}

// A transformer-shaped chain: embedding, n blocks (with a selective option),
// final norm, LM head with big logits, loss. Sizes vary with `seed`.
inline Profile TransformerChain(int n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  auto jitter = [&](int64_t v) {
    return v + static_cast<int64_t>(std::uniform_int_distribution<int64_t>(0, v / 4)(rng));
  };
  const int64_t x = 1000;
  Profile p;
  p.model = "transformer" + std::to_string(n);
  p.source = "test";
  p.static_memory.parameter_bytes = 5000;
  p.optimizer_ms = 0.5;
  auto add = [&](const std::string& name, const std::string& kind, int64_t in, int64_t out,
                 int64_t act, double f, double b) {
    LayerProfile l;
    l.name = name;
    l.kind = kind;
    l.input_bytes = in;
    l.output_bytes = out;
    l.activation_bytes = act;
    l.forward_ms = f;
    l.backward_ms = b;
    l.forward_workspace_bytes = act / 10;
    l.backward_workspace_bytes = act / 5;
    p.layers.push_back(l);
    return &p.layers.back();
  };
  add("embedding", "embedding", 100, x, x + jitter(500), 0.2, 0.4);
  for (int i = 0; i < n; ++i) {
    const int64_t act = x + jitter(16 * x);
    LayerProfile* l = add("block" + std::to_string(i), "block", x, x, act, 1.0, 2.0);
    SelectiveOption o;
    o.name = "attention_core";
    o.activation_bytes = x + (act - x) * 6 / 10;
    o.extra_recompute_ms = 0.3;
    o.recompute_workspace_bytes = (act - x) * 4 / 10;
    o.forward_workspace_bytes = act / 10 + (act - x) * 4 / 10;  // dropped bytes become transient
    l->selective.push_back(o);
  }
  add("final_norm", "norm", x, x, 2 * x, 0.05, 0.1);
  add("head", "head", x, 8 * x, 9 * x, 0.8, 1.6);
  add("loss", "loss", 8 * x, 4, 8 * x + 4, 0.2, 0.3);
  return p;
}

// A random heterogeneous chain of n layers (sizes 1..100, times 0.1..5).
inline Profile RandomChain(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> size(1, 100);
  std::uniform_real_distribution<double> ms(0.1, 5.0);
  Profile p;
  p.model = "random" + std::to_string(n) + "_" + std::to_string(seed);
  p.source = "test";
  p.static_memory.parameter_bytes = size(rng);
  int64_t x = size(rng);
  for (int i = 0; i < n; ++i) {
    LayerProfile l;
    l.name = "r" + std::to_string(i);
    l.kind = "block";
    l.input_bytes = x;
    l.output_bytes = x = size(rng);
    l.activation_bytes = l.output_bytes + size(rng) * (rng() % 3);
    l.forward_ms = ms(rng);
    l.backward_ms = 2 * l.forward_ms;
    l.forward_workspace_bytes = size(rng) / 4;
    l.backward_workspace_bytes = size(rng) / 4;
    if (rng() % 2) {
      SelectiveOption o;
      o.name = "sel";
      o.activation_bytes = l.output_bytes + (l.activation_bytes - l.output_bytes) / 2;
      o.extra_recompute_ms = l.forward_ms / 3;
      o.recompute_workspace_bytes = (l.activation_bytes - l.output_bytes) / 2;
      if (rng() % 2) o.forward_workspace_bytes = l.forward_workspace_bytes + o.recompute_workspace_bytes;
      l.selective.push_back(o);
    }
    p.layers.push_back(l);
  }
  return p;
}

// `p` with parameter gradients created in backward (PyTorch's
// zero_grad(set_to_none)): every layer's gradient_bytes random in 1..100.
inline Profile WithCreatedGradients(Profile p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> size(1, 100);
  for (LayerProfile& l : p.layers) l.gradient_bytes = size(rng);
  return p;
}

// `p` with backwards that release saved bytes before their peaks, as a
// block's that makes its gradients last (LayerProfile::
// backward_workspace_bytes): every layer's backward workspace random in
// [-(activation_bytes - output_bytes), 10], each selective option's
// recompute workspace random in [0, what it drops] (so that some release
// more than the option keeps, which the simulator caps at a[i]), and
// gradients created in backward (WithCreatedGradients).
inline Profile WithNegativeBackwardWorkspaces(Profile p, uint32_t seed) {
  p = WithCreatedGradients(std::move(p), seed);
  std::mt19937 rng(seed + 1);
  for (LayerProfile& l : p.layers) {
    const int64_t saved = l.activation_bytes - l.output_bytes;
    l.backward_workspace_bytes = -saved + static_cast<int64_t>(rng() % (saved + 11));
    for (SelectiveOption& o : l.selective) {
      o.recompute_workspace_bytes = static_cast<int64_t>(
          rng() % (l.activation_bytes - o.activation_bytes + 1));
    }
  }
  return p;
}

// `p` as a profiler measures it: every layer's forward, backward and
// selective extra times scaled by its own factor in [1 - spread, 1 + spread]
// (timing noise), the bytes untouched. Identical blocks stop being identical
// to the solvers, as in every measured profile.
inline Profile JitterTimes(Profile p, double spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> factor(1 - spread, 1 + spread);
  for (LayerProfile& l : p.layers) {
    l.forward_ms *= factor(rng);
    l.backward_ms *= factor(rng);
    for (SelectiveOption& o : l.selective) o.extra_recompute_ms *= factor(rng);
  }
  p.source = "measured";
  return p;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_CHAINS_H_
