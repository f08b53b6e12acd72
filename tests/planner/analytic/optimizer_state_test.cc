// The state of the optimizers counted tensor by tensor
// (analytic/optimizer_state.h) and their steps' temporaries
// (analytic/optimizer_step.h), on hand-made tensors whose bytes follow from
// the layouts: Adafactor's row and column vectors of a matrix and full
// variance of a vector (a 4 B step counter each), Muon's one moment of a
// matrix beside AdamW's two of a vector, AdamW8bit's bytes and per-256
// scales from 4,096 elements on and fp32 moments below (PagedAdamW8bit's
// the same), torchao's 8-bit, 4-bit and fp8 codes with a scale per block and
// a map per moment where a tensor is a whole number of blocks of 4,096
// elements or more, moments in the parameter's dtype otherwise. The real libraries'
// allocations against the plan: tests/python/optimizer_state_test.py.
#include <gtest/gtest.h>

#include "analytic/optimizer_state.h"
#include "analytic/optimizer_step.h"
#include "analytic/transformer_graph.h"

namespace remat {
namespace {

using analytic::OptimizerStateBytes;
using analytic::OptimizerStepWorkspace;
using analytic::TrainedTensor;

ModelConfig Job(Optimizer optimizer, Precision precision = Precision::kFp32) {
  ModelConfig c;
  c.optimizer = optimizer;
  c.precision = precision;
  return c;
}

const TrainedTensor kMatrix = {8 * 16, false, {8, 16}};
const TrainedTensor kExperts = {2 * 8 * 16, false, {2, 8, 16}};
const TrainedTensor kVector = {10, false, {}};

TEST(OptimizerState, AdafactorFactorsMatricesAndKeepsVectorsWhole) {
  EXPECT_EQ(*OptimizerStateBytes({kMatrix}, Job(Optimizer::kAdafactor)), 4 + (8 + 16) * 4);
  // (2, 8, 1) and (2, 1, 16).
  EXPECT_EQ(*OptimizerStateBytes({kExperts}, Job(Optimizer::kAdafactor)), 4 + (16 + 32) * 4);
  EXPECT_EQ(*OptimizerStateBytes({kVector}, Job(Optimizer::kAdafactor)), 4 + 10 * 4);
  EXPECT_EQ(*OptimizerStateBytes({kMatrix}, Job(Optimizer::kAdafactor, Precision::kBf16)),
            4 + (8 + 16) * 2);
}

TEST(OptimizerState, MuonTakesMatricesAndAdamWTheRest) {
  EXPECT_EQ(*OptimizerStateBytes({kMatrix, kVector, kExperts}, Job(Optimizer::kMuon)),
            8 * 16 * 4 + (4 + 10 * 8) + (4 + 2 * 8 * 16 * 8));
  // Master weights add 4 B a parameter.
  EXPECT_EQ(*OptimizerStateBytes({kMatrix}, Job(Optimizer::kMuon, Precision::kMixedBf16)),
            8 * 16 * 4 + 8 * 16 * 4);
}

TEST(OptimizerState, AdamW8bitQuantizesFrom4096Elements) {
  const TrainedTensor big = {4096 + 1, false, {4097, 1}};
  const TrainedTensor small = {4095, false, {}};
  // 2 B an element, two fp32 scales per (partial) block of 256, the maps once.
  EXPECT_EQ(*OptimizerStateBytes({big}, Job(Optimizer::kAdamW8bit)), 2 * 4097 + 17 * 8 + 2048);
  EXPECT_EQ(*OptimizerStateBytes({small}, Job(Optimizer::kAdamW8bit)), 4095 * 8);
  EXPECT_EQ(*OptimizerStateBytes({big, big, small}, Job(Optimizer::kAdamW8bit)),
            2 * (2 * 4097 + 17 * 8) + 4095 * 8 + 2048);
}

TEST(OptimizerState, PagedAdamW8bitKeepsAdamW8bitsBytes) {
  const TrainedTensor big = {4096 + 1, false, {4097, 1}};
  const TrainedTensor small = {4095, false, {}};
  EXPECT_EQ(*OptimizerStateBytes({big, small}, Job(Optimizer::kPagedAdamW8bit)),
            *OptimizerStateBytes({big, small}, Job(Optimizer::kAdamW8bit)));
  EXPECT_EQ(OptimizerStepWorkspace({big}, Job(Optimizer::kPagedAdamW8bit), false).bytes,
            OptimizerStepWorkspace({big}, Job(Optimizer::kAdamW8bit), false).bytes);
}

TEST(OptimizerState, TorchaoQuantizesWholeBlocksFrom4096Elements) {
  const TrainedTensor blocks = {4096, false, {64, 64}};      // 16 of 256, 32 of 128
  const TrainedTensor halves = {4096 + 128, false, {33, 128}};  // 33 of 128, not of 256
  const TrainedTensor small = {2048, false, {32, 64}};
  // Per moment: codes, an fp32 scale per block, the moment's own map; a 4 B
  // step counter per tensor.
  EXPECT_EQ(*OptimizerStateBytes({blocks}, Job(Optimizer::kTorchaoAdamW8bit)),
            4 + 2 * (4096 + 16 * 4 + 256 * 4));
  EXPECT_EQ(*OptimizerStateBytes({blocks}, Job(Optimizer::kTorchaoAdamW4bit)),
            4 + 2 * (2048 + 32 * 4 + 16 * 4));
  EXPECT_EQ(*OptimizerStateBytes({blocks}, Job(Optimizer::kTorchaoAdamWFp8)),
            4 + 2 * (4096 + 16 * 4));
  // Not a whole number of 256-element blocks: moments in the weight's dtype
  // for 8-bit and fp8, quantized for 4-bit.
  EXPECT_EQ(*OptimizerStateBytes({halves}, Job(Optimizer::kTorchaoAdamW8bit)), 4 + 4224 * 8);
  EXPECT_EQ(*OptimizerStateBytes({halves}, Job(Optimizer::kTorchaoAdamW4bit)),
            4 + 2 * (2112 + 33 * 4 + 16 * 4));
  EXPECT_EQ(*OptimizerStateBytes({small}, Job(Optimizer::kTorchaoAdamWFp8)), 4 + 2048 * 8);
  EXPECT_EQ(*OptimizerStateBytes({small}, Job(Optimizer::kTorchaoAdamWFp8, Precision::kBf16)),
            4 + 2048 * 4);
  // Master weights add 4 B a parameter.
  EXPECT_EQ(*OptimizerStateBytes({blocks}, Job(Optimizer::kTorchaoAdamWFp8, Precision::kMixedBf16)),
            4 + 2 * (4096 + 16 * 4) + 4096 * 4);
}

TEST(OptimizerStep, MuonHoldsTheBf16IteratesAndGramMatrices) {
  // fp32 8 x 16: the nesterov update (512 B), its bf16 copy, the Gram
  // matrix and its polynomial (8 x 8 bf16, 128 B each), the next iterate.
  const analytic::StepWorkspace w = OptimizerStepWorkspace({kMatrix}, Job(Optimizer::kMuon), false);
  EXPECT_EQ(w.bytes, 512 + 256 + 128 + 128 + 256);
}

TEST(OptimizerStep, AdafactorMakesTheEstimateOfEachMatrix) {
  // Row means (8 x 4 B), column means (16 x 4 B), then the 8 x 16 estimate.
  const analytic::StepWorkspace w =
      OptimizerStepWorkspace({kMatrix}, Job(Optimizer::kAdafactor), true);
  EXPECT_EQ(w.bytes, 32 + 64 + 512);
  // A vector after it: the matrix's update and means live on while the
  // squared gradient and the clone are made.
  EXPECT_EQ(OptimizerStepWorkspace({kMatrix, kVector}, Job(Optimizer::kAdafactor), true).bytes,
            512 + 32 + 64 + 40 + 40);
  EXPECT_EQ(OptimizerStepWorkspace({kVector, kVector}, Job(Optimizer::kAdafactor), true).bytes,
            3 * 40);
}

TEST(OptimizerStep, AdamW8bitInPlaceOnAGpuFiveCopiesOnTheCpu) {
  const TrainedTensor big = {8192, false, {64, 128}};
  EXPECT_EQ(OptimizerStepWorkspace({big}, Job(Optimizer::kAdamW8bit), true).bytes, 0);
  EXPECT_EQ(OptimizerStepWorkspace({big}, Job(Optimizer::kAdamW8bit), false).bytes, 5 * 8192 * 4);
  EXPECT_EQ(
      OptimizerStepWorkspace({big}, Job(Optimizer::kAdamW8bit, Precision::kBf16), false).bytes,
      6 * 8192 * 4);
}

}  // namespace
}  // namespace remat
