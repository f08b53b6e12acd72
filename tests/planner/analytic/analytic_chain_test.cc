// One analytic chain (BuildAnalyticChain) shared by configs that differ in
// their optimizer, gradient dtype and gradient clipping alone: the profile
// made from it is the profile made afresh, field for field, over decoders
// (Llama, Gemma 2's alternating attention, a mixture of experts), an
// encoder, LoRA and QLoRA, every precision and gradient convention, on a
// GPU, the CPU and under tensor and sequence parallelism.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/analytic/analytic.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

const char* const kLlama = testing::kTinyLlamaConfig;
const char kGemma[] = R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2",
    "hidden_size":256,"intermediate_size":512,"num_hidden_layers":4,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":64,"sliding_window":64,"query_pre_attn_scalar":64,
    "max_position_embeddings":512,"vocab_size":8000})";
const char kMixtral[] = R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral",
    "hidden_size":256,"intermediate_size":512,"num_hidden_layers":3,"num_attention_heads":8,
    "num_key_value_heads":2,"num_local_experts":4,"num_experts_per_tok":2,
    "max_position_embeddings":512,"vocab_size":8000})";
const char kBert[] = R"({"architectures":["BertForMaskedLM"],"model_type":"bert",
    "hidden_size":256,"intermediate_size":1024,"num_hidden_layers":3,"num_attention_heads":4,
    "max_position_embeddings":512,"type_vocab_size":2,"vocab_size":8000})";

// What the chain does not read, in every combination tried.
std::vector<ModelConfig> StepVariants(const ModelConfig& c) {
  std::vector<ModelConfig> out;
  for (Optimizer o : {Optimizer::kAdamW, Optimizer::kSgd, Optimizer::kSgdMomentum, Optimizer::kNone,
                      Optimizer::kAdafactor, Optimizer::kMuon, Optimizer::kAdamW8bit,
                      Optimizer::kPagedAdamW8bit, Optimizer::kTorchaoAdamW8bit,
                      Optimizer::kTorchaoAdamW4bit, Optimizer::kTorchaoAdamWFp8}) {
    for (GradDtype g : {GradDtype::kDefault, GradDtype::kFp32, GradDtype::kBf16, GradDtype::kFp16}) {
      ModelConfig v = c;
      v.optimizer = o;
      v.grad_dtype = g;
      v.max_grad_norm = out.size() % 2 == 0 ? 0.0 : 1.0;
      out.push_back(v);
    }
  }
  return out;
}

TEST(AnalyticChain, ProfileFromASharedChainIsTheProfileMadeAfresh) {
  std::vector<std::pair<ModelConfig, AnalyticOptions>> bases;
  AnalyticOptions gpu;
  gpu.device = *LookupDevice("h100");
  AnalyticOptions cpu;
  cpu.device = *LookupDevice("cpu");
  AnalyticOptions custom;
  custom.tflops = 123;
  AnalyticOptions tp = gpu;
  tp.parallel.tensor = 2;
  tp.parallel.sequence = true;
  for (const char* json : {kLlama, kGemma, kMixtral, kBert}) {
    for (Precision p :
         {Precision::kFp32, Precision::kBf16, Precision::kAmpFp16, Precision::kMixedBf16}) {
      for (Gradients g : {Gradients::kDefault, Gradients::kCreatedInBackward,
                          Gradients::kPersistent}) {
        ModelConfig c = testing::Hf(json);
        c.seq_len = 128;
        c.micro_batch = 2;
        c.precision = p;
        c.gradients = g;
        bases.push_back({c, json == kBert ? cpu : gpu});
      }
    }
  }
  ModelConfig llama = testing::Hf(kLlama);
  llama.seq_len = 128;
  llama.precision = Precision::kMixedBf16;
  bases.push_back({llama, tp});
  bases.push_back({llama, custom});
  llama.gradients = Gradients::kCreatedInBackward;
  bases.push_back({llama, tp});
  ModelConfig lora = llama;
  lora.lora_rank = 8;
  bases.push_back({lora, gpu});
  lora.quantization = Quantization::kNf4;
  bases.push_back({lora, gpu});
  lora.precision = Precision::kBf16;
  bases.push_back({lora, gpu});

  int compared = 0;
  for (const auto& [base, options] : bases) {
    const std::vector<ModelConfig> variants = StepVariants(base);
    // The chain built from the first variant and from one with another
    // optimizer, gradient dtype and clipping serves each other one.
    for (size_t from : {size_t{0}, variants.size() / 2 + 1}) {
      Result<std::shared_ptr<const AnalyticChain>> chain =
          BuildAnalyticChain(variants[from], options);
      Result<Profile> own = AnalyticProfile(variants[from], options);
      ASSERT_EQ(chain.ok(), own.ok()) << base.name;
      if (!chain.ok()) continue;
      for (const ModelConfig& v : variants) {
        SCOPED_TRACE(base.name + " precision " + std::to_string(static_cast<int>(v.precision)) +
                     " gradients " + std::to_string(static_cast<int>(v.gradients)) +
                     " optimizer " + std::to_string(static_cast<int>(v.optimizer)) +
                     " grad_dtype " + std::to_string(static_cast<int>(v.grad_dtype)) +
                     " lora " + std::to_string(v.lora_rank));
        Result<Profile> fresh = AnalyticProfile(v, options);
        Result<Profile> shared = AnalyticProfile(v, options, **chain);
        ASSERT_EQ(fresh.ok(), shared.ok());
        if (!fresh.ok()) {
          EXPECT_EQ(fresh.status().message(), shared.status().message());
          continue;
        }
        EXPECT_EQ(ProfileToJson(*fresh), ProfileToJson(*shared));
        EXPECT_EQ(fresh->static_memory.optimizer_bytes, shared->static_memory.optimizer_bytes);
        EXPECT_EQ(fresh->optimizer_ms, shared->optimizer_ms);
        ASSERT_EQ(fresh->layers.size(), shared->layers.size());
        for (size_t i = 0; i < fresh->layers.size(); ++i) {
          EXPECT_EQ(fresh->layers[i].gradient_bytes, shared->layers[i].gradient_bytes);
          EXPECT_EQ(fresh->layers[i].tensors.gradients, shared->layers[i].tensors.gradients);
          EXPECT_EQ(fresh->layers[i].keeps_input, shared->layers[i].keeps_input);
          EXPECT_EQ(fresh->layers[i].attention_backend, shared->layers[i].attention_backend);
        }
        ++compared;
      }
    }
  }
  // Most variants are valid configs: the comparison is not vacuous.
  EXPECT_GT(compared, 1000);
}

}  // namespace
}  // namespace remat
