#include "remat/analytic/analytic.h"

#include <gtest/gtest.h>

#include "testing/gpt_chain.h"

namespace remat {
namespace {

ModelConfig Gpt3LayerShape(Precision precision, AttentionImpl attention) {
  return testing::GptLayerShape(12288, 96, precision, attention);
}

const LayerProfile& Block(const Profile& p) { return testing::FirstBlock(p); }

// What the paper's formulas leave out: each of a block's two LayerNorms
// keeps an fp32 mean and rstd per token (16 bytes a token in all).
constexpr int64_t kLayerNormStats = 16;

// Korthikanti et al. 2022, table 2: s*b*h*(34 + 5*a*s/h) bytes per layer,
// plus the LayerNorm statistics.
TEST(Analytic, ReproducesKorthikantiPerLayerActivations) {
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    Result<Profile> prof = AnalyticProfile(Gpt3LayerShape(p, AttentionImpl::kEager), {});
    ASSERT_TRUE(prof.ok()) << prof.status().message();
    const LayerProfile& block = Block(*prof);
    EXPECT_EQ(block.activation_bytes, 2'868'903'936 + kLayerNormStats * 2048);
    // Selective recompute of the attention core leaves 34*s*b*h.
    // then mlp_activation, both, norm_output, all three, dropout_mask, all four
    ASSERT_EQ(block.selective.size(), 7u);
    EXPECT_EQ(block.selective[0].name, "attention_core");
    EXPECT_EQ(block.selective[0].activation_bytes,
              int64_t{34} * 2048 * 12288 + kLayerNormStats * 2048);
    EXPECT_GT(block.selective[0].extra_recompute_ms, 0);
    // What is dropped is made again when the block's backward starts. The
    // full backward and this one both peak in attn@v's backward, where the
    // full one still holds the s x s tensors it kept: there the option
    // holds them too (5 a s^2 b bytes, made again instead of kept) and the
    // context's gradient (s b h 16-bit values), which the recomputed core
    // holds until its backward is done. The recompute workspace, counted
    // against the full backward's (negative: the qkv projection's
    // gradients are made after that peak), is those bytes exactly.
    EXPECT_LT(block.backward_workspace_bytes, 0);
    EXPECT_EQ(block.selective[0].recompute_workspace_bytes,
              int64_t{5} * 96 * 2048 * 2048 + int64_t{2} * 2048 * 12288);
    // Its forward holds the s x s tensors it will not keep: a larger workspace.
    EXPECT_GT(block.selective[0].forward_workspace_bytes, block.forward_workspace_bytes);
  }
}

TEST(Analytic, FlashAttentionDropsTheQuadraticTerms) {
  Result<Profile> prof =
      AnalyticProfile(Gpt3LayerShape(Precision::kBf16, AttentionImpl::kFlash), {});
  ASSERT_TRUE(prof.ok());
  // 34 sbh and the kernel's fp32 logsumexp (a*s*b floats) for its backward.
  const int64_t lse = int64_t{96} * 2048 * 4;
  EXPECT_EQ(Block(*prof).activation_bytes,
            int64_t{34} * 2048 * 12288 + kLayerNormStats * 2048 + lse);
  // Recomputing the core would drop the logsumexp alone: no quadratic term is left.
  ASSERT_EQ(Block(*prof).selective.size(), 7u);
  EXPECT_EQ(Block(*prof).selective[0].activation_bytes, Block(*prof).activation_bytes - lse);
}

TEST(Analytic, Fp32DoublesEverythingButTheMasks) {
  Result<Profile> prof =
      AnalyticProfile(Gpt3LayerShape(Precision::kFp32, AttentionImpl::kEager), {});
  ASSERT_TRUE(prof.ok());
  const int64_t sbh = int64_t{2048} * 12288, as2b = int64_t{96} * 2048 * 2048;
  // 16-bit: 32 sbh of values + 2 sbh of masks; 4 as^2b of values + 1 as^2b mask.
  EXPECT_EQ(Block(*prof).activation_bytes,
            2 * 32 * sbh + 2 * sbh + 2 * 4 * as2b + as2b + kLayerNormStats * 2048);
}

TEST(Analytic, NoDropoutNoMasks) {
  ModelConfig c = Gpt3LayerShape(Precision::kBf16, AttentionImpl::kEager);
  c.dropout = 0;
  Result<Profile> prof = AnalyticProfile(c, {});
  ASSERT_TRUE(prof.ok());
  const int64_t sbh = int64_t{2048} * 12288, as2b = int64_t{96} * 2048 * 2048;
  // Without dropout the attention probabilities feed attn@v directly.
  EXPECT_EQ(Block(*prof).activation_bytes, 32 * sbh + 2 * as2b + kLayerNormStats * 2048);
}

ModelConfig Gpt2Small() {
  ModelConfig c = testing::Gpt2Shape(12);
  c.name = "gpt2";
  return c;
}

TEST(Analytic, ParameterCounts) {
  EXPECT_EQ(ParameterCount(Gpt2Small()), 124'439'808);

  ModelConfig llama;
  llama.architecture = Architecture::kLlama;
  llama.layers = 32;
  llama.hidden = 4096;
  llama.heads = 32;
  llama.ffn_hidden = 11008;
  llama.vocab = 32000;
  llama.seq_len = 2048;
  llama.tie_embeddings = false;
  EXPECT_EQ(ParameterCount(llama), 6'738'415'616);

  // RobertaForMaskedLM shapes: roberta-base has 124,697,433 parameters.
  ModelConfig roberta;
  roberta.architecture = Architecture::kBert;
  roberta.layers = 12;
  roberta.hidden = 768;
  roberta.heads = 12;
  roberta.ffn_hidden = 3072;
  roberta.vocab = 50265;
  roberta.seq_len = 512;
  roberta.max_position = 514;
  EXPECT_EQ(ParameterCount(roberta), 124'697'433);
  roberta.layers = 6;  // distilroberta-base
  EXPECT_EQ(ParameterCount(roberta), 82'170'201);
}

TEST(Analytic, ModelStateBytesPerParameter) {
  EXPECT_EQ(ModelStatePerParameter(Precision::kFp32, Optimizer::kAdamW).total(), 16);
  EXPECT_EQ(ModelStatePerParameter(Precision::kAmpBf16, Optimizer::kAdamW).total(), 16);
  EXPECT_EQ(ModelStatePerParameter(Precision::kAmpFp16, Optimizer::kAdamW).total(), 16);
  EXPECT_EQ(ModelStatePerParameter(Precision::kBf16, Optimizer::kAdamW).total(), 8);
  EXPECT_EQ(ModelStatePerParameter(Precision::kFp32, Optimizer::kSgd).total(), 8);
  EXPECT_EQ(ModelStatePerParameter(Precision::kFp32, Optimizer::kSgdMomentum).total(), 12);
  EXPECT_EQ(ModelStatePerParameter(Precision::kBf16, Optimizer::kNone).total(), 4);
}

// The tensors every block of a decoder receives are buffers beside the
// model state (as a measured profile counts them): eager attention's (b, 1,
// s, s) causal mask in the weights' dtype, and a rotary decoder's int64
// position ids and (s, head_dim) cos and sin tables; none in an encoder, no
// mask where a fused kernel masks itself. The buffers grow with the
// micro-batch, the model state does not.
TEST(Analytic, BuffersBesideTheWeightsGrowWithTheBatch) {
  auto state = [](Architecture architecture, AttentionImpl attention, Precision precision) {
    ModelConfig c;
    c.name = "buffers";
    c.architecture = architecture;
    c.layers = 2;
    c.hidden = 64;
    c.heads = 4;
    c.ffn_hidden = 128;
    c.vocab = 100;
    c.seq_len = 48;
    c.max_position = 64;
    c.micro_batch = 2;
    c.precision = precision;
    c.attention = attention;
    c.dropout = 0;
    Result<Profile> p = AnalyticProfile(c, {});
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok()) return int64_t{-1};
    const int64_t weight_bytes = precision == Precision::kFp32 ? 4 : 2;
    EXPECT_EQ(p->static_memory.parameter_bytes, weight_bytes * p->parameters);
    EXPECT_EQ(p->model_state_bytes(),
              p->static_bytes() - p->static_memory.buffer_bytes + p->total_gradient_bytes());
    return p->static_memory.buffer_bytes;
  };
  const int64_t b = 2, s = 48, d = 16;
  EXPECT_EQ(state(Architecture::kGpt, AttentionImpl::kEager, Precision::kFp32), b * s * s * 4);
  EXPECT_EQ(state(Architecture::kGpt, AttentionImpl::kSdpa, Precision::kFp32), 0);
  EXPECT_EQ(state(Architecture::kLlama, AttentionImpl::kEager, Precision::kBf16),
            b * s * s * 2 + s * 8 + s * 2 * d * 2);
  EXPECT_EQ(state(Architecture::kLlama, AttentionImpl::kFlash, Precision::kFp32),
            s * 8 + s * 2 * d * 4);
  EXPECT_EQ(state(Architecture::kBert, AttentionImpl::kEager, Precision::kFp32), 0);
}

TEST(Analytic, ChainHasEveryLayerAndLogitsAreLargest) {
  ModelConfig c = Gpt2Small();
  c.micro_batch = 8;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->num_layers(), 12 + 4);
  EXPECT_EQ(p->layers.front().name, "embedding");
  EXPECT_EQ(p->layers[1].name, "block0");
  EXPECT_EQ(p->layers[13].name, "final_norm");
  EXPECT_EQ(p->layers[14].name, "head");
  EXPECT_EQ(p->layers[15].name, "loss");
  EXPECT_EQ(p->parameters, 124'439'808);
  // fp32 AdamW: 16 bytes a parameter, the gradients' 4 created in backward;
  // and the eager attention's (b, 1, s, s) fp32 causal mask, a buffer.
  EXPECT_EQ(p->static_bytes() + p->total_gradient_bytes(),
            16 * int64_t{124'439'808} + int64_t{8} * 1024 * 1024 * 4);
  EXPECT_EQ(p->layers[0].input_bytes, 2 * int64_t{8} * 1024 * 8);  // int64 ids and targets
  // The logits (s*b*V fp32) are the largest single tensor in the chain.
  const int64_t logits = int64_t{1024} * 8 * 50257 * 4;
  EXPECT_EQ(p->layers[14].output_bytes, logits);
  for (const LayerProfile& l : p->layers) EXPECT_LE(l.output_bytes, logits);
  for (const LayerProfile& l : p->layers) {
    EXPECT_GT(l.forward_ms, 0) << l.name;
    EXPECT_GT(l.backward_ms, l.forward_ms) << l.name;
  }
}

TEST(Analytic, TimesFollowTheDevice) {
  ModelConfig c = Gpt2Small();
  AnalyticOptions a100, h200, slow;
  a100.device = *LookupDevice("a100");
  h200.device = *LookupDevice("h200");
  slow.tflops = 1.0;
  const Profile pa = *AnalyticProfile(c, a100), ph = *AnalyticProfile(c, h200);
  EXPECT_LT(ph.layers[1].forward_ms, pa.layers[1].forward_ms);
  EXPECT_GT(AnalyticProfile(c, slow)->layers[1].forward_ms, pa.layers[1].forward_ms);
  EXPECT_FALSE(LookupDevice("tpu").ok());
  EXPECT_NE(LookupDevice("tpu").status().message().find("h200"), std::string::npos);
}

TEST(Analytic, AbsurdSizesAreRejectedNotWrapped) {
  ModelConfig c = Gpt2Small();
  c.seq_len = 1 << 24;
  c.max_position = 1 << 24;
  c.micro_batch = 1 << 24;
  c.heads = 1 << 10;
  c.hidden = 1 << 20;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(p.status().message().find("overflow"), std::string::npos);
}

TEST(Analytic, LargeButRealModelsDoNotOverflow) {
  // A 175B-parameter model at 32k tokens: byte counts far beyond 2^32.
  ModelConfig c = Gpt3LayerShape(Precision::kBf16, AttentionImpl::kEager);
  c.layers = 96;
  c.seq_len = 32768;
  c.max_position = 32768;
  c.micro_batch = 4;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const int64_t s = 32768, b = 4, h = 12288, a = 96;
  EXPECT_EQ(Block(*p).activation_bytes,
            s * b * h * 34 + 5 * a * s * s * b + kLayerNormStats * s * b);
}

TEST(Analytic, EveryArchitectureAndPrecisionBuildsAValidChain) {
  for (Architecture arch : {Architecture::kGpt, Architecture::kBert, Architecture::kLlama}) {
    for (Precision prec : {Precision::kFp32, Precision::kBf16, Precision::kFp16,
                           Precision::kAmpBf16, Precision::kAmpFp16}) {
      for (AttentionImpl attn :
           {AttentionImpl::kEager, AttentionImpl::kFlash, AttentionImpl::kSdpa}) {
        ModelConfig c = Gpt2Small();
        c.architecture = arch;
        c.precision = prec;
        c.attention = attn;
        c.layers = 2;
        Result<Profile> p = AnalyticProfile(c, {});
        ASSERT_TRUE(p.ok()) << ToString(arch) << " " << ToString(prec) << ": "
                            << p.status().message();
        EXPECT_TRUE(ValidateProfile(*p, "test").ok());
        EXPECT_EQ(BlockLayers(*p).size(), 2u);
      }
    }
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

const LayerProfile& LayerNamed(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l;
  }
  static const LayerProfile none;
  ADD_FAILURE() << "no layer " << name;
  return none;
}

TEST(Analytic, GradientsAreCreatedByEachLayersBackward) {
  ModelConfig c = Gpt2Small();
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const int64_t per = ModelStatePerParameter(c.precision, c.optimizer).gradients;
  EXPECT_EQ(p->static_memory.gradient_bytes, 0);
  EXPECT_EQ(p->total_gradient_bytes(), TrainableParameterCount(c) * per);
  // The tied token embedding's gradient is created by the LM head, whose
  // backward runs first; the embedding's backward creates the positions'.
  EXPECT_EQ(LayerNamed(*p, "head").gradient_bytes, c.vocab * c.hidden * per);
  EXPECT_EQ(LayerNamed(*p, "embedding").gradient_bytes, c.max_position * c.hidden * per);
  EXPECT_EQ(LayerNamed(*p, "loss").gradient_bytes, 0);
  EXPECT_GT(LayerNamed(*p, "block0").gradient_bytes, 0);

  // Persistent buffers: model state, as Megatron/DeepSpeed keep them.
  c.gradients = Gradients::kPersistent;
  Result<Profile> q = AnalyticProfile(c, {});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->static_memory.gradient_bytes, TrainableParameterCount(c) * per);
  EXPECT_EQ(q->total_gradient_bytes(), q->static_memory.gradient_bytes);
  EXPECT_DOUBLE_EQ(q->optimizer_ms, p->optimizer_ms);
  EXPECT_DOUBLE_EQ(q->accumulate_ms, p->accumulate_ms);

  // The mixed_* precisions default to persistent (fp32 gradient buffers).
  c.gradients = Gradients::kDefault;
  c.precision = Precision::kMixedBf16;
  EXPECT_EQ(GradientsOf(c), Gradients::kPersistent);
  EXPECT_GT(AnalyticProfile(c, {})->static_memory.gradient_bytes, 0);
}

TEST(Analytic, CrossEntropyDoesNotKeepTheLogitsMnrlKeepsTheEmbeddings) {
  const ModelConfig gpt = Gpt2Small();
  Result<Profile> p = AnalyticProfile(gpt, {});
  ASSERT_TRUE(p.ok());
  for (const LayerProfile& l : p->layers) EXPECT_EQ(l.keeps_input, l.kind != kLossKind) << l.name;

  ModelConfig bert = testing::Gpt2Shape(2);
  bert.architecture = Architecture::kBert;
  bert.head = Head::kPooling;
  bert.loss = Loss::kMnrl;
  bert.texts_per_example = 3;
  Result<Profile> mnrl = AnalyticProfile(bert, {});
  ASSERT_TRUE(mnrl.ok()) << mnrl.status().message();
  EXPECT_TRUE(LayerNamed(*mnrl, "loss").keeps_input);  // F.normalize keeps its input
  bert.head = Head::kClassification;
  bert.loss = Loss::kDefault;
  bert.texts_per_example = 0;
  Result<Profile> cls = AnalyticProfile(bert, {});
  ASSERT_TRUE(cls.ok()) << cls.status().message();
  EXPECT_FALSE(LayerNamed(*cls, "loss").keeps_input);
}

// A head whose ops save nothing of its input and compute no parameter
// gradient lets it die after its forward: mean pooling (its masked sum
// keeps the mask), a frozen LM head (keeps its weight). CLS pooling's first
// token may be a view of its input, so that head keeps it.
TEST(Analytic, MeanPoolingAndFrozenHeadsDoNotKeepTheirInput) {
  ModelConfig bert = testing::Gpt2Shape(2);
  bert.architecture = Architecture::kBert;
  bert.head = Head::kPooling;
  bert.loss = Loss::kMnrl;
  bert.texts_per_example = 3;
  for (Pooling pooling : {Pooling::kMean, Pooling::kCls}) {
    bert.pooling = pooling;
    Result<Profile> p = AnalyticProfile(bert, {});
    ASSERT_TRUE(p.ok()) << p.status().message();
    int heads = 0;
    for (const LayerProfile& l : p->layers) {
      if (l.kind != kHeadKind) continue;
      ++heads;
      EXPECT_EQ(l.keeps_input, pooling == Pooling::kCls) << l.name;
    }
    EXPECT_GT(heads, 0);
  }

  ModelConfig gpt = Gpt2Small();
  for (int rank : {0, 8}) {
    gpt.lora_rank = rank;
    if (rank > 0) gpt.lora_targets = kLoraQ | kLoraV;
    Result<Profile> p = AnalyticProfile(gpt, {});
    ASSERT_TRUE(p.ok()) << p.status().message();
    // Trained, the head's linear keeps its input for the weight's gradient.
    EXPECT_EQ(LayerNamed(*p, "head").keeps_input, rank == 0);
    EXPECT_TRUE(LayerNamed(*p, "final_norm").keeps_input);
  }
}

}  // namespace
}  // namespace remat
