// Parameter counts of published models from their config.json, and what the
// llama, encoder and sentence-embedding parts keep for backward.
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

using testing::Hf;

std::string Llama(const std::string& type, int layers, int hidden, int heads, int kv, int ffn,
                  int vocab, bool tied, const std::string& extra = "") {
  return R"({"architectures":["LlamaForCausalLM"],"model_type":")" + type +
         R"(","num_hidden_layers":)" + std::to_string(layers) + R"(,"hidden_size":)" +
         std::to_string(hidden) + R"(,"num_attention_heads":)" + std::to_string(heads) +
         R"(,"num_key_value_heads":)" + std::to_string(kv) + R"(,"intermediate_size":)" +
         std::to_string(ffn) + R"(,"max_position_embeddings":8192,"vocab_size":)" +
         std::to_string(vocab) + R"(,"tie_word_embeddings":)" + (tied ? "true" : "false") + extra +
         "}";
}

constexpr char kRobertaBase[] = R"({"architectures":["RobertaForMaskedLM"],
    "model_type":"roberta","num_hidden_layers":12,"hidden_size":768,"num_attention_heads":12,
    "intermediate_size":3072,"max_position_embeddings":514,"type_vocab_size":1,
    "vocab_size":50265,"hidden_dropout_prob":0.1})";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

TEST(ModelFamilies, DecoderParameterCounts) {
  ModelConfig gpt2 = Hf(R"({"model_type":"gpt2","n_layer":12,"n_embd":768,"n_head":12,
      "n_positions":1024,"vocab_size":50257})");
  EXPECT_EQ(ParameterCount(gpt2), 124'439'808);
  ModelConfig xl = Hf(R"({"model_type":"gpt2","n_layer":48,"n_embd":1600,"n_head":25,
      "n_positions":1024,"vocab_size":50257})");
  EXPECT_EQ(ParameterCount(xl), 1'557'611'200);
  EXPECT_EQ(ParameterCount(Hf(Llama("llama", 32, 4096, 32, 32, 11008, 32000, false))),
            6'738'415'616);  // LLaMA-2-7B
  EXPECT_EQ(ParameterCount(Hf(Llama("llama", 32, 4096, 32, 8, 14336, 128256, false))),
            8'030'261'248);  // Llama-3-8B
  EXPECT_EQ(
      ParameterCount(Hf(Llama("llama", 16, 2048, 32, 8, 8192, 128256, true, R"(,"head_dim":64)"))),
      1'235'814'400);  // Llama-3.2-1B, tied
  EXPECT_EQ(ParameterCount(Hf(Llama("mistral", 32, 4096, 32, 8, 14336, 32000, false))),
            7'241'732'096);  // Mistral-7B
  ModelConfig qwen = Hf(Llama("qwen2", 24, 896, 14, 2, 4864, 151936, true));
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_EQ(ParameterCount(qwen), 494'032'768);  // Qwen2-0.5B: q/k/v biases
}

TEST(ModelFamilies, EncoderParameterCounts) {
  ModelConfig mlm = Hf(kRobertaBase);
  EXPECT_EQ(mlm.head, Head::kMlm);
  EXPECT_EQ(ParameterCount(mlm), 124'697'433);
  // AutoModel: RobertaModel with its pooler, which no sentence loss trains.
  ModelConfig model = Hf(Replace(kRobertaBase, "RobertaForMaskedLM", "RobertaModel"));
  EXPECT_EQ(model.head, Head::kPooling);
  EXPECT_TRUE(model.pooler);
  EXPECT_EQ(ParameterCount(model), 124'645'632);
  EXPECT_EQ(TrainableParameterCount(model), 124'645'632 - 768 * 768 - 768);
  ModelConfig distil = Hf(Replace(Replace(kRobertaBase, "RobertaForMaskedLM", "RobertaModel"),
                                  "\"num_hidden_layers\":12", "\"num_hidden_layers\":6"));
  EXPECT_EQ(ParameterCount(distil), 82'118'400);  // distilroberta-base
  ModelConfig bert = Hf(R"({"architectures":["BertForMaskedLM"],"model_type":"bert",
      "num_hidden_layers":12,"hidden_size":768,"num_attention_heads":12,
      "intermediate_size":3072,"max_position_embeddings":512,"type_vocab_size":2,
      "vocab_size":30522})");
  EXPECT_EQ(ParameterCount(bert), 109'514'298);  // bert-base-uncased
  ModelConfig distilbert = Hf(R"({"architectures":["DistilBertForMaskedLM"],
      "model_type":"distilbert","n_layers":6,"dim":768,"n_heads":12,"hidden_dim":3072,
      "max_position_embeddings":512,"vocab_size":30522,"sinusoidal_pos_embds":false})");
  EXPECT_EQ(ParameterCount(distilbert), 66'985'530);
  ModelConfig cls =
      Hf(Replace(kRobertaBase, "RobertaForMaskedLM", "RobertaForSequenceClassification"));
  EXPECT_EQ(cls.head, Head::kClassification);
  EXPECT_EQ(ParameterCount(cls), 124'055'040 + 768 * 768 + 768 + 768 * 2 + 2);
  EXPECT_EQ(TrainableParameterCount(cls), ParameterCount(cls));
}

const LayerProfile& Layer(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l;
  }
  static LayerProfile none;
  ADD_FAILURE() << "no layer " << name;
  return none;
}

ModelConfig SmallLlama(AttentionImpl attention) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.layers = 1;
  c.hidden = 256;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_dim = 40;  // not hidden / heads
  c.ffn_hidden = 688;
  c.vocab = 1000;
  c.seq_len = 64;
  c.micro_batch = 2;
  c.precision = Precision::kBf16;
  c.attention = attention;
  c.dropout = 0;
  c.tie_embeddings = false;
  return c;
}

// bf16, per token of a llama block with grouped-query attention:
//   each RMSNorm (HF, op by op): fp32 copy 4h + rsqrt 4 + normalized 2h;
//   the norms' outputs, kept by the projections: 2h twice;
//   eager: q 2ad, k and v repeated to a heads 2ad each, context 2ad,
//          fp32 probabilities 4as and their bf16 copy 2as;
//   flash: q 2ad, k and v 2*kv*d each (no repeat), context 2ad, the fp32
//   logsumexp 4a per token;
//   SwiGLU: gate 2f, silu(gate) 2f, up 2f, product 2f; the output 2h.
TEST(ModelFamilies, LlamaBlockKeepsWhatAutogradSaves) {
  const int64_t h = 256, a = 8, kv = 2, d = 40, f = 688, s = 64, b = 2;
  const int64_t common = 2 * (6 * h + 4) + 2 * h + 2 * h + 8 * f + 2 * h;
  Result<Profile> eager = AnalyticProfile(SmallLlama(AttentionImpl::kEager), {});
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  EXPECT_EQ(Layer(*eager, "block0").activation_bytes, s * b * (common + 8 * a * d + 6 * a * s));
  Result<Profile> flash = AnalyticProfile(SmallLlama(AttentionImpl::kFlash), {});
  ASSERT_TRUE(flash.ok()) << flash.status().message();
  EXPECT_EQ(Layer(*flash, "block0").activation_bytes,
            s * b * (common + 4 * a * d + 4 * kv * d + 4 * a));
  // q: h x a*d, k and v: h x kv*d, o: a*d x h; two norms; gate, up, down.
  const int64_t block = h * a * d * 2 + 2 * h * kv * d + 2 * h + 3 * h * f;
  EXPECT_EQ(eager->parameters, 1000 * h * 2 + block + h);
  ModelConfig biased = SmallLlama(AttentionImpl::kEager);
  biased.qkv_bias = true;
  EXPECT_EQ(ParameterCount(biased), eager->parameters + a * d + 2 * kv * d);
}

// fp16, eager, dropout, per token of an encoder block (HF BertLayer):
// q, k 4h; v 2h; probabilities 2as, their mask as, dropped 2as; context 2h;
// two dropout masks h each; each LayerNorm's input 2h, output 2h (kept by
// the next linear, or the block's output) and fp32 mean and rstd 8; GELU in
// and out 4f.
TEST(ModelFamilies, BertBlockKeepsWhatAutogradSaves) {
  ModelConfig c = Hf(kRobertaBase);
  c.attention = AttentionImpl::kEager;
  c.layers = 1;
  c.seq_len = 128;
  c.micro_batch = 4;
  c.precision = Precision::kFp16;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const int64_t h = 768, f = 3072, a = 12, s = 128, b = 4;
  EXPECT_EQ(Layer(*p, "block0").activation_bytes, s * b * (18 * h + 4 * f + 5 * a * s + 16));
  EXPECT_EQ(p->num_layers(), 1 + 3);  // embedding, block0, head, loss
}

TEST(ModelFamilies, HfConfigsRunSdpaUnlessTheyNameAnother) {
  EXPECT_EQ(Hf(kRobertaBase).attention, AttentionImpl::kSdpa);  // transformers' default
  EXPECT_EQ(Hf(Replace(kRobertaBase, "\"vocab_size\"",
                       "\"attn_implementation\":\"eager\",\"vocab_size\""))
                .attention,
            AttentionImpl::kEager);
  EXPECT_EQ(Hf(Replace(kRobertaBase, "\"vocab_size\"",
                       "\"_attn_implementation\":\"flash_attention_2\",\"vocab_size\""))
                .attention,
            AttentionImpl::kFlash);
  EXPECT_EQ(Hf(Replace(kRobertaBase, "\"vocab_size\"",
                       "\"remat\":{\"attention\":\"eager\"},\"vocab_size\""))
                .attention,
            AttentionImpl::kEager);
}

Profile OnDevice(const ModelConfig& c, const char* device) {
  AnalyticOptions o;
  o.device = *LookupDevice(device);
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

// Blocks as transformers 5.24 (sdpa) runs them on PyTorch 2.11's CPU kernels,
// fp32, with the bytes remat's CPU meter measured from a forward hook
// around each layer (bench/fidelity/models/hf/, the shapes of bench/fidelity/hf_fidelity.sh).
TEST(ModelFamilies, SdpaKeepsWhatPyTorchsKernelsKeep) {
  // Llama, GQA 8/2, no attention dropout: the CPU flash kernel (q, k and v
  // unrepeated, the output and the fp32 logsumexp) on CPU as on CUDA.
  ModelConfig llama = Hf(Llama("llama", 4, 256, 8, 2, 688, 8000, false));
  llama.seq_len = 256;
  llama.micro_batch = 4;
  EXPECT_EQ(Layer(OnDevice(llama, "cpu"), "block0").activation_bytes, 20'226'048);
  llama.attention = AttentionImpl::kFlash;
  EXPECT_EQ(Layer(OnDevice(llama, "a100"), "block0").activation_bytes, 20'226'048);
  // BERT with attention dropout 0.1: on CPU the math path (q and k scaled
  // copies, fp32 probabilities, an fp32 dropout mask and the dropped
  // probabilities), and the hidden dropouts' masks fp32 too.
  ModelConfig bert = Hf(R"({"architectures":["BertForMaskedLM"],"model_type":"bert",
      "hidden_size":256,"intermediate_size":1024,"num_hidden_layers":4,"num_attention_heads":4,
      "max_position_embeddings":512,"type_vocab_size":2,"vocab_size":8000})");
  bert.seq_len = 128;
  bert.micro_batch = 8;
  const Profile cpu = OnDevice(bert, "cpu");
  EXPECT_EQ(Layer(cpu, "block0").activation_bytes, 25'182'208);
  EXPECT_EQ(Layer(cpu, "head").activation_bytes, 35'921'920);  // transform + decoder
  // On CUDA the fused kernel draws the dropout: no s x s tensor, 1-byte masks.
  const int64_t tokens = 128 * 8, h = 256, f = 1024, a = 4;
  EXPECT_EQ(Layer(OnDevice(bert, "a100"), "block0").activation_bytes,
            tokens * (4 * 4 * h + 4 * a + 2 * h + 2 * (8 * h + 8) + 2 * 4 * f));
}

// LayerNorm's mean and rstd: fp32 on CUDA, the input's dtype on CPU (the
// runtime's bf16 kept bytes on CPU, tests/runtime/chain_model_test.cc).
TEST(ModelFamilies, LayerNormStatisticsFollowTheDevice) {
  ModelConfig c = Hf(kRobertaBase);
  c.layers = 1;
  c.seq_len = 128;
  c.micro_batch = 4;
  c.dropout = 0;  // masks differ by device too
  c.attention = AttentionImpl::kEager;
  c.precision = Precision::kBf16;
  const int64_t rows = 128 * 4, layer_norms = 2, stats = 2;
  EXPECT_EQ(Layer(OnDevice(c, "a100"), "block0").activation_bytes -
                Layer(OnDevice(c, "cpu"), "block0").activation_bytes,
            layer_norms * stats * rows * (4 - 2));
  c.precision = Precision::kFp32;
  EXPECT_EQ(Layer(OnDevice(c, "a100"), "block0").activation_bytes,
            Layer(OnDevice(c, "cpu"), "block0").activation_bytes);
}

// Autocast's softmax: CUDA's policy runs it in fp32 (fp32 probabilities,
// cast back to bf16 for the matmul with v, both kept); CPU's has no entry
// for it, so it runs on the bf16 scores (torch 2.11; the runtime's amp_bf16
// measured-profile cell, tests/runtime/accumulation_test.cc).
TEST(ModelFamilies, AutocastSoftmaxFollowsTheDevicesPolicy) {
  ModelConfig c;
  c.layers = 1;
  c.hidden = 128;
  c.heads = 4;
  c.ffn_hidden = 512;
  c.vocab = 2048;
  c.seq_len = 128;
  c.max_position = 128;
  c.micro_batch = 4;
  c.dropout = 0;  // masks differ by device too
  c.precision = Precision::kAmpBf16;
  c = WithDefaults(c);
  const int64_t scores = int64_t{4} * 128 * 128 * 4;  // heads x s x s x b
  EXPECT_EQ(Layer(OnDevice(c, "a100"), "block0").activation_bytes -
                Layer(OnDevice(c, "cpu"), "block0").activation_bytes,
            scores * (4 + 2 - 2));
}

constexpr char kSeedJob[] = R"({"architectures":["RobertaForMaskedLM"],"model_type":"roberta",
    "num_hidden_layers":6,"hidden_size":768,"num_attention_heads":12,"intermediate_size":3072,
    "max_position_embeddings":514,"type_vocab_size":1,"vocab_size":50265,
    "remat":{"head":"pooling","pooling":"mean","loss":"mnrl","texts_per_example":3,
             "micro_batch":128,"seq_len":75,"precision":"amp_fp16","merge_columns":false}})";

// The distilroberta-base MNRL job: 128 triplets of at most 75 tokens through distilroberta-base
// (sentence-transformers: AutoModel, mean pooling, MultipleNegativesRankingLoss).
TEST(ModelFamilies, MnrlOnTripletsIsASentenceEmbeddingJob) {
  ModelConfig c = Hf(kSeedJob);
  EXPECT_EQ(c.head, Head::kPooling);
  EXPECT_EQ(c.loss, Loss::kMnrl);
  EXPECT_EQ(SequencesPerMicroBatch(c), 384);
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const int64_t h = 768, s = 75, b = 128, t = 3, n = s * b * t;
  EXPECT_EQ(p->parameters, 82'118'400);
  // The unused pooler holds weights only: fp32 weights, grads and AdamW state
  // for the rest.
  const int64_t trained = 82'118'400 - h * h - h;
  EXPECT_EQ(p->static_memory.parameter_bytes, 4 * 82'118'400);
  EXPECT_EQ(p->total_gradient_bytes(), 4 * trained);  // created in backward
  EXPECT_EQ(p->static_memory.optimizer_bytes, 8 * trained);
  // No vocabulary logits anywhere: the largest tensor is a block's (one
  // pass's: sentence-transformers encodes anchors, positives and negatives
  // in separate passes).
  for (const LayerProfile& l : p->layers) EXPECT_LE(l.output_bytes, n / t * h * 4) << l.name;
  // Mean pooling (sentence-transformers v5+) keeps the (s*b x 1) mask in the
  // embeddings' dtype (fp32 here: amp's last LayerNorm is fp32) and the
  // per-text token counts (b, fp32); its output is the fp32 mean, which the
  // last pass hands to the loss as its output and the others as a skip.
  EXPECT_EQ(Layer(*p, "p1.head").activation_bytes, n / t * 4 + b * 4);
  EXPECT_EQ(Layer(*p, "p1.head").skip_bytes, b * h * 4);
  EXPECT_EQ(Layer(*p, "p3.head").activation_bytes, n / t * 4 + b * 4 + b * h * 4);
  EXPECT_EQ(Layer(*p, "p3.head").skip_bytes, 0);
  // mnrl: candidates (t-1)b x h fp32; norms and clamped norms, fp32, per
  // row; fp16 casts of the normalized anchors and candidates (the matmul's
  // inputs); fp32 log-probabilities b x (t-1)b; the loss; the int64 labels
  // (arange(b)) nll_loss keeps.
  const int64_t others = (t - 1) * b;
  EXPECT_EQ(Layer(*p, "loss").activation_bytes, others * h * 4 + 2 * b * 4 + 2 * others * 4 +
                                                    (b + others) * h * 2 + b * others * 4 + 4 +
                                                    b * 8);
}

TEST(ModelFamilies, HfHeadOverrideIsCheckedLikeModelJson) {
  Result<ModelConfig> bad =
      ParseHfConfig(Replace(kSeedJob, "\"loss\":\"mnrl\"", "\"los\":1"), "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown field 'los'"), std::string::npos)
      << bad.status().message();
  bad = ParseHfConfig(Replace(kSeedJob, "\"texts_per_example\":3", "\"texts_per_example\":1"),
                      "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "config.json: field 'texts_per_example': 1: mnrl needs an anchor and at least one "
            "positive per example; expected an integer in [2, 1024] (2 pairs, 3 triplets)");
  bad = ParseHfConfig(Llama("llama", 2, 64, 4, 4, 128, 100, false, R"(,"attention_bias":true)"),
                      "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'attention_bias'"), std::string::npos);
}

}  // namespace
}  // namespace remat
