// One rank layout (BuildRankLayout) shared by configs that differ in their
// optimizer, gradient dtype and gradient clipping alone, or in their
// micro-batch and accumulation alone: the ranks made from it are the ranks
// made afresh, field for field, over a dense and a mixture-of-experts
// decoder, LoRA and QLoRA, several precisions and gradient conventions,
// under FSDP2, ZeRO-3 with the optimizer state offloaded, and tensor and
// pipeline parallelism.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/ranks/rank_memory.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

const char* const kLlama = testing::kTinyLlamaConfig;
const char kMixtral[] = R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral",
    "hidden_size":256,"intermediate_size":512,"num_hidden_layers":4,"num_attention_heads":8,
    "num_key_value_heads":2,"num_local_experts":4,"num_experts_per_tok":2,
    "max_position_embeddings":512,"vocab_size":8000})";

std::vector<Parallelism> Layouts() {
  std::vector<Parallelism> out;
  Parallelism fsdp;
  fsdp.gpus = 8;
  fsdp.data = DataParallel::kFsdp2;
  out.push_back(fsdp);
  Parallelism zero3 = fsdp;
  zero3.gpus = 4;
  zero3.data = DataParallel::kZero3;
  zero3.offload = StateOffload::kOptimizer;
  out.push_back(zero3);
  Parallelism tp_pp = fsdp;
  tp_pp.tensor = 2;
  tp_pp.pipeline = 2;
  out.push_back(tp_pp);
  return out;
}

// Every figure of a replica's state.
std::vector<int64_t> Figures(const ReplicaState& r) {
  return {r.weight_bytes, r.gradient_bytes, r.optimizer_bytes, r.master_weight_bytes,
          r.block_weight_bytes, r.block_gradient_bytes, r.root_weight_bytes,
          r.gradient_element_bytes, r.persistent_weight_bytes, r.block_persistent_weight_bytes,
          r.root_persistent_weight_bytes, r.micro_batches, r.gather_blocks,
          r.trained_weight_bytes, r.largest_trained_weight_bytes};
}

void ExpectSameRanks(const std::vector<RankMemory>& a, const std::vector<RankMemory>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].rank, b[i].rank);
    EXPECT_EQ(a[i].ranks, b[i].ranks);
    EXPECT_EQ(a[i].stage, b[i].stage);
    EXPECT_EQ(a[i].in_flight, b[i].in_flight);
    EXPECT_EQ(ProfileToJson(a[i].profile), ProfileToJson(b[i].profile));
    EXPECT_EQ(ProfileToJson(*a[i].stage_profile), ProfileToJson(*b[i].stage_profile));
    EXPECT_EQ(a[i].profile.model_state_bytes(), b[i].profile.model_state_bytes());
    EXPECT_EQ(Figures(a[i].replica), Figures(b[i].replica));
    EXPECT_EQ(a[i].state.parameter_bytes, b[i].state.parameter_bytes);
    EXPECT_EQ(a[i].state.gradient_bytes, b[i].state.gradient_bytes);
    EXPECT_EQ(a[i].state.optimizer_bytes, b[i].state.optimizer_bytes);
    EXPECT_EQ(a[i].state.host_bytes(), b[i].state.host_bytes());
  }
}

// Expects `v`'s ranks under `p` from `layout` to be those made afresh (or
// both to fail alike); whether both were made and compared. A config
// without an analytic profile under `p` (the tensor split of a mixture of
// experts) is not compared.
bool SameRanksFromLayout(const ModelConfig& v, const Parallelism& p, const RankLayout& layout) {
  AnalyticOptions options;
  options.parallel = p;
  Result<Profile> whole = AnalyticProfile(v, options);
  if (!whole.ok()) return false;
  Result<std::vector<RankMemory>> fresh = RankMemories(v, *whole, p);
  Result<std::vector<RankMemory>> shared = RankMemories(v, *whole, p, layout);
  EXPECT_EQ(fresh.ok(), shared.ok());
  if (!fresh.ok() || !shared.ok()) {
    if (!fresh.ok() && !shared.ok()) {
      EXPECT_EQ(fresh.status().message(), shared.status().message());
    }
    return false;
  }
  ExpectSameRanks(*fresh, *shared);
  // `whole` shared, with the layout given or built: the same ranks, those
  // that hold every layer as it is keeping `whole` itself.
  const auto whole_shared = std::make_shared<const Profile>(*whole);
  for (const RankLayout* given : {&layout, static_cast<const RankLayout*>(nullptr)}) {
    Result<std::vector<RankMemory>> sharing = RankMemories(v, whole_shared, p, given);
    EXPECT_TRUE(sharing.ok());
    if (!sharing.ok()) return false;
    ExpectSameRanks(*fresh, *sharing);
    for (const RankMemory& r : *sharing) {
      EXPECT_EQ(r.stage_profile == whole_shared, p.pipeline == 1 && p.tensor == 1);
    }
  }
  return true;
}

// Dense and mixture-of-experts decoders at several precisions and
// gradient conventions, LoRA and QLoRA.
std::vector<ModelConfig> Bases() {
  std::vector<ModelConfig> bases;
  for (const char* json : {kLlama, kMixtral}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kMixedBf16}) {
      for (Gradients g : {Gradients::kDefault, Gradients::kCreatedInBackward}) {
        ModelConfig c = testing::Hf(json);
        c.seq_len = 128;
        c.grad_accumulation = 4;
        c.precision = p;
        c.gradients = g;
        bases.push_back(c);
      }
    }
  }
  ModelConfig lora = testing::Hf(kLlama);
  lora.seq_len = 128;
  lora.precision = Precision::kBf16;
  lora.lora_rank = 8;
  bases.push_back(lora);
  lora.quantization = Quantization::kNf4;
  bases.push_back(lora);
  return bases;
}

TEST(RankLayout, RanksFromASharedLayoutAreTheRanksMadeAfresh) {
  const std::vector<ModelConfig> bases = Bases();
  int compared = 0;
  for (const ModelConfig& base : bases) {
    std::vector<ModelConfig> variants;
    for (Optimizer o : {Optimizer::kAdamW, Optimizer::kNone, Optimizer::kAdafactor,
                        Optimizer::kMuon, Optimizer::kAdamW8bit}) {
      for (GradDtype g : {GradDtype::kDefault, GradDtype::kBf16}) {
        ModelConfig v = base;
        v.optimizer = o;
        v.grad_dtype = g;
        v.max_grad_norm = variants.size() % 2 == 0 ? 0.0 : 1.0;
        variants.push_back(v);
      }
    }
    const ModelConfig& from = variants[variants.size() / 2 + 1];
    Result<std::shared_ptr<const RankLayout>> layout = BuildRankLayout(from);
    ASSERT_TRUE(layout.ok()) << layout.status().message();
    for (const Parallelism& p : Layouts()) {
      if (p.tensor > 1 && base.lora_rank > 0) continue;  // the split is not modeled for LoRA
      for (const ModelConfig& v : variants) {
        SCOPED_TRACE(base.name + " precision " + std::to_string(static_cast<int>(v.precision)) +
                     " optimizer " + std::to_string(static_cast<int>(v.optimizer)) +
                     " grad_dtype " + std::to_string(static_cast<int>(v.grad_dtype)) +
                     " lora " + std::to_string(v.lora_rank) + " gpus " + std::to_string(p.gpus));
        if (SameRanksFromLayout(v, p, **layout)) ++compared;
      }
    }
  }
  // Most variants are valid jobs: the comparison is not vacuous.
  EXPECT_GT(compared, 250);
}

// A global batch's search makes every micro-batch's ranks from the layout
// of the job's model at its own micro-batch (SearchBatch).
TEST(RankLayout, OneLayoutServesEveryMicroBatchAndAccumulation) {
  int compared = 0;
  for (const ModelConfig& base : Bases()) {
    ModelConfig from = base;
    from.micro_batch = 1;
    from.grad_accumulation = 1;
    Result<std::shared_ptr<const RankLayout>> layout = BuildRankLayout(from);
    ASSERT_TRUE(layout.ok()) << layout.status().message();
    for (const Parallelism& p : Layouts()) {
      if (p.tensor > 1 && base.lora_rank > 0) continue;  // the split is not modeled for LoRA
      for (int64_t micro_batch : {1, 2, 3, 8}) {
        for (int64_t accumulation : {1, 4, 6}) {
          ModelConfig v = base;
          v.micro_batch = micro_batch;
          v.grad_accumulation = accumulation;
          SCOPED_TRACE(base.name + " precision " + std::to_string(static_cast<int>(v.precision)) +
                       " lora " + std::to_string(v.lora_rank) + " gpus " + std::to_string(p.gpus) +
                       " micro_batch " + std::to_string(micro_batch) + " grad_accumulation " +
                       std::to_string(accumulation));
          if (SameRanksFromLayout(v, p, **layout)) ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 300);
}

// The layout taken from the graph of a job's analytic chain is the layout
// built afresh, over every config.json of examples/hf at several precisions
// and gradient conventions, LoRA and QLoRA, on a GPU and on the CPU, under
// tensor parallelism with and without sequence parallelism (the split
// graph keeps the model's parameter counts).
TEST(RankLayout, TheLayoutOfAChainIsTheLayoutBuiltAfresh) {
  std::vector<std::string> paths;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(REMAT_SOURCE_DIR) + "/examples/hf")) {
    const std::string path = e.path().string();
    if (path.size() > 12 && path.compare(path.size() - 12, 12, ".config.json") == 0) {
      paths.push_back(path);
    }
  }
  ASSERT_GT(paths.size(), 20u);
  int compared = 0, split = 0;
  for (const std::string& path : paths) {
    Result<PlannerInput> input = LoadPlannerInput(path);
    ASSERT_TRUE(input.ok()) << input.status().message();
    std::vector<ModelConfig> variants;
    for (Precision precision : {Precision::kMixedBf16, Precision::kFp32}) {
      for (Gradients g : {Gradients::kDefault, Gradients::kCreatedInBackward}) {
        ModelConfig v = input->config;
        v.seq_len = 256;
        v.precision = precision;
        v.gradients = g;
        variants.push_back(v);
      }
    }
    for (Quantization q : {Quantization::kNone, Quantization::kNf4}) {
      ModelConfig v = input->config;
      v.seq_len = 256;
      v.precision = Precision::kBf16;
      v.lora_rank = 8;
      v.quantization = q;
      variants.push_back(v);
    }
    for (const ModelConfig& v : variants) {
      Result<std::shared_ptr<const RankLayout>> fresh = BuildRankLayout(v);
      for (const char* device : {"a100", "cpu"}) {
        for (const auto& [tensor, sequence] :
             std::vector<std::pair<int64_t, bool>>{{1, false}, {2, false}, {8, true}}) {
          SCOPED_TRACE(path + " precision " + std::to_string(static_cast<int>(v.precision)) +
                       " gradients " + std::to_string(static_cast<int>(v.gradients)) +
                       " lora " + std::to_string(v.lora_rank) + " device " + device +
                       " tensor " + std::to_string(tensor) + " sequence " +
                       std::to_string(sequence));
          AnalyticOptions options;
          Result<DeviceSpec> spec = LookupDevice(device);
          ASSERT_TRUE(spec.ok());
          options.device = *spec;
          options.parallel.data = DataParallel::kFsdp2;
          options.parallel.tensor = tensor;
          options.parallel.sequence = sequence;
          options.parallel.gpus = 8 * tensor;
          Result<std::shared_ptr<const AnalyticChain>> chain = BuildAnalyticChain(v, options);
          if (!chain.ok()) continue;  // a split the model does not allow
          ASSERT_TRUE(fresh.ok()) << fresh.status().message();
          const std::shared_ptr<const RankLayout> from_chain = RankLayoutOfChain(**chain);
          EXPECT_TRUE(SameLayout(*from_chain, **fresh));
          EXPECT_EQ(TrainableParameters(*from_chain), TrainableParameters(**fresh));
          if (tensor > 1) ++split;
          // The ranks made from it, for one variant on the GPU.
          if (tensor == 1 && &v == &variants.front() && options.device.name == "a100" &&
              SameRanksFromLayout(v, options.parallel, *from_chain)) {
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(paths.size()));
  EXPECT_GT(split, 100);  // the split graphs compared are not vacuous
}

}  // namespace
}  // namespace remat
