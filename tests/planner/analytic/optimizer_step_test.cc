// The optimizer step's temporaries (analytic/optimizer_step.h): torch.optim's
// AdamW makes each parameter's denominator, per parameter on the CPU (the
// previous one's alive while the next one's square root and quotient are
// made: d[i-1] + 2 d[i]) and all at once with foreach on a GPU (the sum of
// d); SGD and an optimizer with master weights make none. The model's
// trained tensors add up to its trained parameters, and the analytic
// profile carries the step's temporaries.
#include <gtest/gtest.h>

#include <numeric>

#include "analytic/optimizer_step.h"
#include "analytic/transformer_graph.h"
#include "remat/analytic/analytic.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

using analytic::BuildTransformerGraph;
using analytic::OptimizerStepWorkspace;
using analytic::TrainedTensor;
using analytic::TransformerGraph;

ModelConfig Job(Precision precision, Optimizer optimizer) {
  ModelConfig c;
  c.precision = precision;
  c.optimizer = optimizer;
  return c;
}

const std::vector<TrainedTensor> kTensors = {{10, false}, {100, false}, {5, false}, {100, false}};

TEST(OptimizerStep, AdamWPerParameterHoldsThePreviousDenominatorAndTwoOfTheNext) {
  const analytic::StepWorkspace w =
      OptimizerStepWorkspace(kTensors, Job(Precision::kFp32, Optimizer::kAdamW), false);
  // Parameter 1: 10's denominator, 100's square root and quotient (fp32),
  // and the division's scalar (a double, and its fp32 cast).
  EXPECT_EQ(w.bytes, 4 * (10 + 2 * 100) + 8 + 4);
  EXPECT_EQ(w.tensors, (TensorSizes{40, 400, 400, 8, 4}));
}

TEST(OptimizerStep, AdamWForeachMakesEveryDenominatorAtOnce) {
  const analytic::StepWorkspace w =
      OptimizerStepWorkspace(kTensors, Job(Precision::kFp32, Optimizer::kAdamW), true);
  EXPECT_EQ(w.bytes, 4 * 215);
  EXPECT_EQ(w.tensors, (TensorSizes{40, 400, 20, 400}));
}

TEST(OptimizerStep, TheMomentsDtype) {
  // Pure bf16 keeps the moments in bf16; autocast in fp32.
  EXPECT_EQ(OptimizerStepWorkspace(kTensors, Job(Precision::kBf16, Optimizer::kAdamW), false).bytes,
            2 * 210 + 8 + 2);
  EXPECT_EQ(
      OptimizerStepWorkspace(kTensors, Job(Precision::kAmpBf16, Optimizer::kAdamW), false).bytes,
      4 * 210 + 8 + 4);
  // A LoRA adapter's state in lora_dtype.
  ModelConfig c = Job(Precision::kAmpBf16, Optimizer::kAdamW);
  c.lora_dtype = LoraDtype::kBf16;
  EXPECT_EQ(OptimizerStepWorkspace({{100, true}}, c, true).bytes, 2 * 100);
}

TEST(OptimizerStep, SgdAndMasterWeightsMakeNone) {
  for (Optimizer o : {Optimizer::kSgd, Optimizer::kSgdMomentum, Optimizer::kNone}) {
    EXPECT_EQ(OptimizerStepWorkspace(kTensors, Job(Precision::kFp32, o), true).bytes, 0);
  }
  EXPECT_EQ(OptimizerStepWorkspace(kTensors, Job(Precision::kFp32, Optimizer::kSgd), false).bytes,
            0);
  // Per parameter, the momentum multiply's scalar (a double and its cast).
  EXPECT_EQ(
      OptimizerStepWorkspace(kTensors, Job(Precision::kFp32, Optimizer::kSgdMomentum), false).bytes,
      12);
  EXPECT_EQ(
      OptimizerStepWorkspace(kTensors, Job(Precision::kMixedBf16, Optimizer::kAdamW), true).bytes,
      0);
}

ModelConfig Tiny(Architecture a) {
  ModelConfig c;
  c.name = "tiny";
  c.architecture = a;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 1000;
  c.seq_len = 32;
  c.max_position = 64;
  c.micro_batch = 2;
  c.precision = Precision::kFp32;
  c.optimizer = Optimizer::kAdamW;
  return c;
}

TEST(OptimizerStep, TheTrainedTensorsAreTheTrainedParameters) {
  std::vector<ModelConfig> jobs;
  for (Architecture a : {Architecture::kGpt, Architecture::kLlama, Architecture::kBert}) {
    jobs.push_back(Tiny(a));
    jobs.back().tie_embeddings = a != Architecture::kLlama;
  }
  ModelConfig lora = Tiny(Architecture::kLlama);
  lora.lora_rank = 8;
  lora.lora_targets = kLoraQ | kLoraV;
  jobs.push_back(lora);
  jobs.push_back(testing::MiniLmJob(3, 4, ""));  // two passes: counted once
  for (const ModelConfig& c : jobs) {
    SCOPED_TRACE(c.name + " " + ToString(c.architecture));
    Result<TransformerGraph> g = BuildTransformerGraph(WithDefaults(c));
    ASSERT_TRUE(g.ok()) << g.status().message();
    int64_t sum = 0;
    for (const TrainedTensor& t : g->trained_tensors) sum += t.elements;
    EXPECT_EQ(sum, g->trainable_parameters);
    EXPECT_EQ(std::count_if(g->trained_tensors.begin(), g->trained_tensors.end(),
                            [](const TrainedTensor& t) { return t.adapter; }) > 0,
              c.lora_rank > 0);
  }
}

TEST(OptimizerStep, TheMiniLmProfileOnCpuHoldsTwoWordEmbeddings) {
  // all-MiniLM-L6-v2's largest tensor is its first, the word embeddings
  // (30522 x 384): the step's peak is its square root and quotient and the
  // division's scalar, 93,763,596 B, as torch.optim.AdamW measures on CPU.
  const Profile cpu = testing::AnalyticOnCpu(testing::MiniLmJob(2, 4, ""));
  EXPECT_EQ(cpu.optimizer_workspace_bytes, 2 * 30522 * 384 * 4 + 12);
  // On a GPU, foreach: every trained parameter's, fp32.
  Result<Profile> gpu = AnalyticProfile(testing::MiniLmJob(2, 4, ""), {});
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(gpu->optimizer_workspace_bytes, 22565376 * 4);
  const TensorSizes& t = gpu->optimizer_workspace_tensors;
  EXPECT_EQ(std::accumulate(t.begin(), t.end(), int64_t{0}), gpu->optimizer_workspace_bytes);
}

}  // namespace
}  // namespace remat
