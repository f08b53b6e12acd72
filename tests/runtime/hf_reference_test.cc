// The runtime's llama (GQA, RMSNorm, rotary, SwiGLU; qwen2's q/k/v biases)
// and bert MLM compute what Hugging Face transformers' own modules compute:
// the weights, a batch and the loss go to tests/runtime/hf_reference.py,
// which loads them into LlamaForCausalLM / Qwen2ForCausalLM /
// BertForMaskedLM / BertForSequenceClassification (eager, no dropout), or a BertModel under
// sentence-transformers' mean Pooling and MultipleNegativesRankingLoss, and
// compares the loss. Skipped,
// visibly, where the repository's .venv has no transformers.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "chain_model.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

const std::string kPython = REMAT_SOURCE_DIR "/.venv/bin/python";

bool HaveTransformers() {
  const std::string probe = kPython + " -c 'import transformers' > /dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

// The loss of one forward without dropout, checked by transformers.
void ExpectTransformersLoss(ModelConfig c, int kind, const std::string& name) {
  if (!HaveTransformers()) GTEST_SKIP() << kPython << " has no transformers";
  c.dropout = 0;
  c = WithDefaults(c);
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 5);
  const at::Tensor batch = model->MakeBatch(5, 0);
  at::Tensor x = batch;
  {
    c10::NoGradGuard no_grad;
    // Separate text passes: the earlier passes' sentence embeddings go to
    // the loss beside the last pass's.
    std::vector<at::Tensor> skips;
    const int L = model->num_layers();
    for (int i = 0; i < L; ++i) {
      x = model->Forward(i, x, batch, {}, i + 1 == L ? skips : std::vector<at::Tensor>());
      if (model->skips_to_loss(i)) skips.push_back(x);
    }
  }
  c10::List<at::Tensor> dump;
  dump.push_back(at::tensor(
      std::vector<int64_t>{kind, c.layers, c.hidden, c.heads, c.kv_heads, c.head_dim, c.ffn_hidden,
                           c.vocab, c.seq_len, c.max_position, c.type_vocab, c.qkv_bias ? 1 : 0,
                           c.tie_embeddings ? 1 : 0, c.texts_per_example, c.num_labels}));
  dump.push_back(batch);
  dump.push_back(x);
  for (const at::Tensor& p : model->parameters()) dump.push_back(p.detach());
  const std::string path = ::testing::TempDir() + "hf_reference_" + name + ".pt";
  const std::vector<char> bytes = torch::jit::pickle_save(dump);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string command =
      kPython + " " + REMAT_SOURCE_DIR "/tests/runtime/hf_reference.py " + path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(HfReference, LlamaWithGroupedQueryAttention) {
  ExpectTransformersLoss(testing::TinyLlama(), 0, "llama");
}

TEST(HfReference, Qwen2WithQkvBiasesAndWideHeads) {
  ExpectTransformersLoss(testing::TinyQwen2(), 0, "qwen2");
}

// sentence-transformers' own mean Pooling and MultipleNegativesRankingLoss
// on a BertModel, triplets.
TEST(HfReference, SentenceTransformersMeanPoolingMnrl) {
  ExpectTransformersLoss(testing::TinyBert(Head::kPooling), 2, "mnrl");
}

TEST(HfReference, BertForSequenceClassification) {
  ExpectTransformersLoss(testing::TinyBert(Head::kClassification), 3, "classification");
}

TEST(HfReference, BertForMaskedLm) {
  ExpectTransformersLoss(testing::TinyBert(Head::kMlm), 1, "bert");
}

}  // namespace
}  // namespace remat::runtime
