// LoRA and QLoRA in the analytic model: trainable parameters, what frozen
// layers keep, the model state of a frozen base, nf4 storage, the keys.
#include "analytic/lora.h"

#include <gtest/gtest.h>

#include <set>

#include "analytic/transformer_graph.h"
#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/planning/job.h"
#include "remat/planning/planning.h"
#include "remat/model/precision.h"

namespace remat {
namespace {

using analytic::BuildTransformerGraph;
using analytic::GraphModelState;
using analytic::Nf4Bytes;
using analytic::OpInfo;
using analytic::TransformerGraph;

// meta-llama/Llama-3.2-3B's shape.
ModelConfig Llama32_3B() {
  ModelConfig c;
  c.name = "llama-3.2-3b";
  c.architecture = Architecture::kLlama;
  c.layers = 28;
  c.hidden = 3072;
  c.heads = 24;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.ffn_hidden = 8192;
  c.vocab = 128256;
  c.seq_len = 2048;
  c.tie_embeddings = true;
  c.precision = Precision::kBf16;
  c.dropout = 0;
  return c;
}

ModelConfig SmallLlama() {
  ModelConfig c;
  c.name = "small-llama";
  c.architecture = Architecture::kLlama;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_hidden = 128;
  c.vocab = 100;
  c.seq_len = 16;
  c.micro_batch = 2;
  c.tie_embeddings = false;
  c.dropout = 0;
  return c;
}

const OpInfo& FindOp(const TransformerGraph& g, const std::string& name) {
  for (const OpInfo& op : g.graph.ops()) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  static OpInfo none;
  return none;
}

std::set<std::string> SavedNames(const TransformerGraph& g, const std::string& op) {
  std::set<std::string> names;
  for (int t : FindOp(g, op).saved) names.insert(g.graph.tensors()[t].name);
  return names;
}

int64_t BlockActivation(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l.activation_bytes;
  }
  ADD_FAILURE() << "no layer " << name;
  return -1;
}

TEST(Lora, Llama32_3BRank32OnQAndVTrains9175040Parameters) {
  ModelConfig c = Llama32_3B();
  const int64_t full = ParameterCount(c);
  c.lora_rank = 32;
  c.lora_targets = kLoraQ | kLoraV;
  EXPECT_EQ(TrainableParameterCount(c), 9175040);
  // The adapters add to the weights the model holds.
  EXPECT_EQ(ParameterCount(c), full + 9175040);
}

TEST(Lora, ModelStateHoldsTheFrozenBaseWithoutGradientsOrMoments) {
  ModelConfig c = Llama32_3B();
  c.lora_rank = 32;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const int64_t all = ParameterCount(c), trained = 9175040;
  // The buffers beside the weights (bf16): eager attention's (b, 1, s, s)
  // causal mask, the int64 position ids and the rotary cos and sin tables.
  const int64_t s = 2048;
  const int64_t buffers = c.micro_batch * s * s * 2 + s * 8 + s * 2 * 128 * 2;
  // bf16: 2-byte weights; gradients and both AdamW moments in bf16 for the
  // adapters only.
  EXPECT_EQ(p->static_memory.parameter_bytes, 2 * all);
  EXPECT_EQ(p->static_memory.buffer_bytes, buffers);
  EXPECT_EQ(p->total_gradient_bytes(), 2 * trained);  // created in backward
  EXPECT_EQ(p->static_memory.optimizer_bytes, 4 * trained);
  // fp32 adapters on a bf16 base (lora_dtype): the adapters' state is fp32.
  c.lora_dtype = LoraDtype::kFp32;
  p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->static_memory.parameter_bytes, 2 * (all - trained) + 4 * trained);
  EXPECT_EQ(p->static_memory.buffer_bytes, buffers);
  EXPECT_EQ(p->total_gradient_bytes(), 4 * trained);
  EXPECT_EQ(p->static_memory.optimizer_bytes, 8 * trained);
}

TEST(Lora, FrozenLinearKeepsNothingAndTheAdapterKeepsItsInputs) {
  ModelConfig c = SmallLlama();
  c.lora_rank = 4;
  c.lora_targets = kLoraQ;
  Result<TransformerGraph> g = BuildTransformerGraph(c);
  ASSERT_TRUE(g.ok());
  // Before the first trained weight nothing is recorded.
  EXPECT_TRUE(FindOp(*g, "embedding.wte").saved.empty());
  EXPECT_EQ(FindOp(*g, "embedding.wte").backward_flops, 0);
  EXPECT_TRUE(FindOp(*g, "block0.rms1").saved.empty());
  // Frozen projections keep nothing for themselves (fp32: no weight cast).
  EXPECT_TRUE(FindOp(*g, "block1.k_proj").saved.empty());
  EXPECT_TRUE(FindOp(*g, "block1.q_proj").saved.empty());
  EXPECT_TRUE(FindOp(*g, "block1.down_proj").saved.empty());
  // A keeps x (the rms output the base reads: one tensor), B keeps A's output.
  EXPECT_EQ(SavedNames(*g, "block1.q_proj.lora_A"), std::set<std::string>{"block1.rms1"});
  EXPECT_EQ(SavedNames(*g, "block1.q_proj.lora_B"), std::set<std::string>{"block1.q_proj.lora_A"});
  // Block 0's q k^T: only q requires grad, so only k is kept.
  EXPECT_EQ(SavedNames(*g, "block0.scores"), std::set<std::string>{"block0.k_repeated"});
  EXPECT_EQ(SavedNames(*g, "block1.scores").size(), 2u);
  // A frozen RMSNorm weight: x * rstd is kept, normalized is not.
  EXPECT_EQ(SavedNames(*g, "block1.rms2"),
            (std::set<std::string>{"block1.residual1", "block1.rms2.rstd"}));
  EXPECT_EQ(g->trainable_parameters, 2 * 4 * (64 + 64));
}

TEST(Lora, WithoutLoraLinearsKeepTheirInputsAndEveryParameterTrains) {
  // Without LoRA every op records its node: the linear keeps its input.
  Result<TransformerGraph> g = BuildTransformerGraph(SmallLlama());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(SavedNames(*g, "block1.k_proj"), std::set<std::string>{"block1.rms1"});
  EXPECT_EQ(SavedNames(*g, "block0.rms1").size(), 3u);
  EXPECT_EQ(g->trainable_parameters, g->parameters);
}

TEST(Lora, DropoutKeepsAMaskAndADroppedCopyPerAdapter) {
  ModelConfig c = SmallLlama();
  c.lora_rank = 4;
  c.lora_targets = kLoraQ | kLoraV;
  Result<Profile> without = AnalyticProfile(c, {});
  c.lora_dropout = 0.05;
  Result<Profile> with = AnalyticProfile(c, {});
  ASSERT_TRUE(without.ok() && with.ok());
  const int64_t rows = c.seq_len * c.micro_batch;
  // q's and v's adapters each keep a 1-byte mask (CUDA) and an fp32 dropped
  // copy of x; without dropout both keep x itself, one tensor.
  EXPECT_EQ(BlockActivation(*with, "block1") - BlockActivation(*without, "block1"),
            2 * rows * c.hidden * (1 + 4) - rows * c.hidden * 4);
}

TEST(Lora, LoraKeepsLessThanFullFineTuning) {
  ModelConfig c = SmallLlama();
  Result<Profile> full = AnalyticProfile(c, {});
  c.lora_rank = 8;
  Result<Profile> lora = AnalyticProfile(c, {});
  ASSERT_TRUE(full.ok() && lora.ok());
  for (const char* layer : {"block0", "block1", "final_norm"}) {
    EXPECT_LT(BlockActivation(*lora, layer), BlockActivation(*full, layer)) << layer;
  }
  EXPECT_LT(lora->static_bytes(), full->static_bytes());
}

TEST(Nf4, BytesOfPackedValuesAbsmaxAndCode) {
  // 4096 x 4096: 8 MiB of nibbles, 262,144 blocks of 64.
  const int64_t n = 4096LL * 4096;
  EXPECT_EQ(Nf4Bytes(n, false), n / 2 + 64 + 4 * 262144);
  // Double-quantized: a byte per block, an fp32 constant per 256 blocks,
  // one fp32 offset.
  EXPECT_EQ(Nf4Bytes(n, true), n / 2 + 64 + 262144 + 4 * 1024 + 4);
  EXPECT_EQ(Nf4Bytes(65, false), 33 + 64 + 8);  // partial blocks round up
}

TEST(Nf4, QuantizesEveryBlockLinearButNotEmbeddingsOrHead) {
  ModelConfig c = SmallLlama();
  c.lora_rank = 4;
  c.quantization = Quantization::kNf4;
  Result<TransformerGraph> g = BuildTransformerGraph(c);
  ASSERT_TRUE(g.ok());
  const int64_t h = 64, kv = 2 * 16, f = 128;
  const int64_t per_block = h * h + 2 * h * kv + h * h + 3 * h * f;
  EXPECT_EQ(g->quantized_parameters, 2 * per_block);
  // Each weight is quantized on its own.
  EXPECT_EQ(g->quantized_bytes, 2 * (2 * Nf4Bytes(h * h, false) + 2 * Nf4Bytes(h * kv, false) +
                                     3 * Nf4Bytes(h * f, false)));
  Result<StaticMemory> state = GraphModelState(*g, WithDefaults(c));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->parameter_bytes,
            4 * (g->parameters - g->quantized_parameters) + g->quantized_bytes);
  // The dequantized weight is a transient of the forward and of backward.
  const OpInfo& q = FindOp(*g, "block1.q_proj");
  EXPECT_EQ(q.backward_workspace, h * h * 4);
  EXPECT_TRUE(q.saved.empty());
}

// sentence-transformers' text passes reuse the first pass's weights: a
// pooling + mnrl encoder on triplets (3 passes) quantizes each weight once.
TEST(Nf4, TextPassesQuantizeEachWeightOnce) {
  ModelConfig c;
  c.name = "small-sbert";
  c.architecture = Architecture::kBert;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 128;
  c.vocab = 100;
  c.seq_len = 16;
  c.max_position = 16;
  c.head = Head::kPooling;
  c.texts_per_example = 3;
  c.merge_columns = false;
  c.lora_rank = 4;
  c.quantization = Quantization::kNf4;
  c.double_quant = true;
  Result<TransformerGraph> g = BuildTransformerGraph(WithDefaults(c));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const int64_t h = 64, f = 128;
  EXPECT_EQ(g->quantized_parameters, 2 * (4 * h * h + 2 * h * f));
  EXPECT_EQ(g->quantized_bytes, 2 * (4 * Nf4Bytes(h * h, true) + 2 * Nf4Bytes(h * f, true)));
  EXPECT_TRUE(GraphModelState(*g, WithDefaults(c)).ok());
}

TEST(LoraConfig, ParsesTargetsAliasesAndWritesThemBack) {
  EXPECT_EQ(*ParseLoraTargets("q,v"), kLoraQ | kLoraV);
  EXPECT_EQ(*ParseLoraTargets("q_proj, v_proj"), kLoraQ | kLoraV);
  EXPECT_EQ(*ParseLoraTargets("all-linear"), kLoraAllLinear);
  EXPECT_EQ(*ParseLoraTargets("c_attn"), kLoraQ | kLoraK | kLoraV);
  EXPECT_EQ(*ParseLoraTargets("c_proj"), kLoraO | kLoraDown);
  EXPECT_EQ(*ParseLoraTargets("query,value"), kLoraQ | kLoraV);
  EXPECT_FALSE(ParseLoraTargets("qv").ok());
  Result<ModelConfig> c = ParseModelConfig(
      R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
          "vocab": 100, "seq_len": 16, "lora_rank": 8, "lora_targets": ["q_proj", "o_proj"],
          "lora_dropout": 0.1, "quantization": "nf4", "double_quant": true})",
      "m.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->lora_targets, kLoraQ | kLoraO);
  EXPECT_EQ(c->lora_alpha, 8);  // PEFT's default
  Result<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*c), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->lora_targets, c->lora_targets);
  EXPECT_EQ(again->quantization, Quantization::kNf4);
  EXPECT_TRUE(again->double_quant);
  EXPECT_EQ(again->lora_dropout, 0.1);
  // A rank alone targets q and v, PEFT's default for llama.
  ModelConfig d = SmallLlama();
  d.lora_rank = 2;
  EXPECT_EQ(WithDefaults(d).lora_targets, kLoraQ | kLoraV);
}

// The model state alone does not fit (pure bf16 AdamW, 8 B a parameter):
// the hint names LoRA and QLoRA with their peaks; a LoRA job is told QLoRA,
// never LoRA again.
TEST(LoraFitAdvice, NamesLoraAndQloraWhenTheModelStateDoesNotFit) {
  auto advice = [](const std::string& lora) {
    Result<PlannerInput> in = ParsePlannerInput(
        R"({"architecture": "llama", "layers": 4, "hidden": 256, "heads": 4, "ffn_hidden": 688,
            "vocab": 4096, "seq_len": 64, "dropout": 0, "precision": "bf16")" +
            lora + "}",
        "m.json");
    EXPECT_TRUE(in.ok()) << in.status().message();
    Result<Job> job = MakeJob(*in, {});
    EXPECT_TRUE(job.ok()) << job.status().message();
    PlanOptions o;
    // Below the model state (weights, gradients, moments) of the job.
    o.budget_bytes = static_cast<int64_t>(0.95 * job->profile.model_state_bytes());
    Result<PlanSet> plans = MakePlan(job->profile, o);
    EXPECT_TRUE(plans.ok() && !plans->chosen.fits);
    return AdviseFit(*job, *plans, o, true).message;
  };
  const std::string full = advice("");
  EXPECT_NE(full.find("LoRA (lora_rank 16 on q,v) fits ("), std::string::npos) << full;
  EXPECT_NE(full.find("QLoRA (nf4 base weights, lora_rank 16) fits ("), std::string::npos) << full;
  const std::string lora = advice(R"(, "lora_rank": 64, "lora_targets": "all-linear")");
  EXPECT_EQ(lora.find("LoRA (lora_rank"), std::string::npos) << lora;
  EXPECT_NE(lora.find("QLoRA (nf4 base weights, lora_rank 64) fits ("), std::string::npos) << lora;
}

// --lora-rank 0 plans full fine-tuning of a model.json that sets LoRA.
TEST(LoraOverrides, RankZeroTurnsLoraOff) {
  Result<PlannerInput> in = ParsePlannerInput(
      R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
          "vocab": 100, "seq_len": 16, "lora_rank": 8, "lora_targets": "all-linear",
          "quantization": "nf4", "double_quant": true})",
      "m.json");
  ASSERT_TRUE(in.ok()) << in.status().message();
  JobOverrides o;
  o.lora_rank = 0;
  Result<Job> job = MakeJob(*in, o);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->config().quantization, Quantization::kNone);
  EXPECT_EQ(TrainableParameterCount(job->config()), ParameterCount(job->config()));
  o.lora_rank = 4;  // another rank keeps the file's targets and quantization
  job = MakeJob(*in, o);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->config().lora_targets, kLoraAllLinear);
  EXPECT_EQ(job->config().quantization, Quantization::kNf4);
}

}  // namespace
}  // namespace remat
