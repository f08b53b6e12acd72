// SDPA's math path op by op (sdpa_math.cc): what it keeps and what it holds
// while it runs, against bench/fidelity/sdpa_math_meter.py's metered bytes on this
// CPU (torch 2.11, b 4, 4 query heads, s 96, d 16, dropout 0.1).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "analytic/chain.h"
#include "analytic/transformer_graph.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

using analytic::BuildTransformerGraph;
using analytic::KernelDevice;
using analytic::OpInfo;
using analytic::ReplayForward;
using analytic::SdpaDeviceFor;
using analytic::TransformerGraph;

using testing::Hf;

constexpr int64_t kB = 4, kA = 4, kS = 96, kD = 16;
constexpr int64_t kNh = kB * kS * kA * kD;      // elements of q (n h)
constexpr int64_t kScores = kB * kA * kS * kS;  // elements of the scores

ModelConfig Config(const std::string& architecture, int kv_heads, Precision precision) {
  ModelConfig c =
      architecture == "bert"
          ? Hf(R"({"architectures":["BertForMaskedLM"],"model_type":"bert","hidden_size":64,
                 "intermediate_size":256,"num_hidden_layers":2,"num_attention_heads":4,
                 "max_position_embeddings":128,"type_vocab_size":1,"vocab_size":512})")
          : Hf(R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
                 "intermediate_size":172,"num_hidden_layers":2,"num_attention_heads":4,
                 "num_key_value_heads":)" +
               std::to_string(kv_heads) +
               R"(,"max_position_embeddings":128,"vocab_size":512,"tie_word_embeddings":false})");
  c.seq_len = kS;
  c.micro_batch = kB;
  c.precision = precision;
  c.attention = AttentionImpl::kSdpa;
  c.dropout = 0.1;  // on CPU: the math path
  return c;
}

// The peak bytes the attention core of block0 holds above its inputs while it
// runs: with grad (what its ops save stays) or without.
struct CorePeaks {
  int64_t with_grad = -1;
  int64_t without_grad = -1;
  int64_t kept = 0;  // what its ops save
};

CorePeaks Core(const ModelConfig& c) {
  KernelDevice cpu;
  cpu.cpu = true;
  cpu.sdpa = SdpaDeviceFor("cpu");
  Result<TransformerGraph> g = BuildTransformerGraph(c, cpu);
  EXPECT_TRUE(g.ok()) << g.status().message();
  CorePeaks p;
  if (!g.ok()) return p;
  EXPECT_EQ(g->attention_backends["block0"], "math");
  std::vector<int> core;
  std::set<int> saved;
  for (size_t i = 0; i < g->graph.ops().size(); ++i) {
    const OpInfo& op = g->graph.ops()[i];
    if (op.layer != "block0" || !op.attention_core) continue;
    core.push_back(static_cast<int>(i));
    saved.insert(op.saved.begin(), op.saved.end());
  }
  for (int t : saved) p.kept += g->graph.tensors()[t].bytes;
  p.with_grad = ReplayForward(g->graph, core, saved);
  p.without_grad = ReplayForward(g->graph, core, {});
  return p;
}

// bf16: q, k and v cast to fp32 and q scaled (locals held to the return, 4 n h
// each), k^T scaled (a temporary), the contiguous copies of scaled q and k
// that bmm keeps, the fp32 scores, probabilities, dropout mask and dropped
// probabilities, their bf16 copy (returned, then dropped), v's contiguous
// copy and the fp32 and bf16 contexts. Peak: at the context's cast.
TEST(SdpaMath, Bf16HoldsItsFp32CopiesUntilItReturns) {
  const CorePeaks p = Core(Config("bert", 4, Precision::kBf16));
  EXPECT_EQ(p.kept, 3 * 4 * kNh + 3 * 4 * kScores);  // q, k, v copies; probs, mask, dropped
  EXPECT_EQ(p.with_grad, (4 + 4 + 4 + 4) * kNh       // q, k, v in fp32, scaled q
                             + (4 + 4 + 4) * kNh     // kept copies of q, k and v
                             + 3 * 4 * kScores       // probs, mask, dropped
                             + 2 * kScores           // the bf16 probabilities
                             + 4 * kNh + 2 * kNh);   // fp32 and bf16 context
  EXPECT_EQ(p.with_grad, 2'899'968);                 // bench/fidelity/sdpa_math_meter.py
  // Without grad the peak is the dropout's: the four locals, the
  // probabilities, the mask and the dropped probabilities.
  EXPECT_EQ(p.without_grad, 16 * kNh + 3 * 4 * kScores);
  EXPECT_EQ(p.without_grad, 2'162'688);  // metered
}

// fp32: no casts; the scaled q is held to the return, k^T scaled until bmm
// has copied it. Peak: the context, with v's copy.
TEST(SdpaMath, Fp32HoldsTheScaledQuery) {
  const CorePeaks p = Core(Config("bert", 4, Precision::kFp32));
  EXPECT_EQ(p.kept, 3 * 4 * kNh + 3 * 4 * kScores);
  EXPECT_EQ(p.with_grad, 4 * kNh + 3 * 4 * kNh + 3 * 4 * kScores + 4 * kNh);
  EXPECT_EQ(p.with_grad, 2'260'992);  // metered
  EXPECT_EQ(p.without_grad, 4 * kNh + 3 * 4 * kScores);
  EXPECT_EQ(p.without_grad, 1'867'776);  // metered
}

// GQA (2 key/value heads) in bf16: k and v repeated to every head
// (contiguous: bmm keeps the scaled k^T and the repeated v as they are, no
// copies), the unrepeated fp32 casts held too.
TEST(SdpaMath, Bf16GqaKeepsTheRepeatedKeysAndValues) {
  const CorePeaks p = Core(Config("llama", 2, Precision::kBf16));
  const int64_t nkv = kNh / 2;
  EXPECT_EQ(p.kept, 3 * 4 * kNh + 3 * 4 * kScores);
  EXPECT_EQ(p.with_grad, 4 * kNh + 2 * 4 * nkv  // q, k, v in fp32
                             + 4 * kNh          // scaled q
                             + 2 * 4 * kNh      // repeated k and v
                             + 4 * kNh          // scaled k^T (kept)
                             + 4 * kNh          // q's contiguous copy (kept)
                             + 3 * 4 * kScores + 2 * kScores + 4 * kNh + 2 * kNh);
  EXPECT_EQ(p.with_grad, 2'899'968);  // metered
}

}  // namespace
}  // namespace remat
