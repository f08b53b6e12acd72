// LoRA and QLoRA in the analytic model: the bytes of nf4 base weights and
// the model state of a job whose base is frozen. Internal to the planner;
// the adapters' ops are built by Builder::Projection (graph_builder.h).
//
// PEFT's LoRA (peft.tuners.lora.Linear): the base layer's weight is frozen;
// the adapter adds B(A(dropout(x))) * alpha/r, A (r x in) and B (out x r)
// trained. The frozen base holds its weights (in their dtype, or nf4) with no
// gradient or optimizer state. bitsandbytes' QLoRA quantizes every linear of
// the blocks (the embeddings and the LM head keep their dtype).
#ifndef REMAT_SRC_ANALYTIC_LORA_H_
#define REMAT_SRC_ANALYTIC_LORA_H_

#include <cstdint>

#include "analytic/transformer_graph.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat::analytic {

// Weights per nf4 quantization block, and blocks per double-quantized
// absmax constant (bitsandbytes' defaults).
inline constexpr int64_t kNf4BlockSize = 64;
inline constexpr int64_t kNf4NestedBlocks = 256;

// Bytes bitsandbytes holds for one nf4 weight of `n` elements: two 4-bit
// values a byte; the 16-entry fp32 code table; an fp32 absmax per block of 64
// or, double-quantized, an 8-bit absmax per block plus an fp32 constant per
// 256 blocks and one fp32 offset (the nested 8-bit code table is shared by
// every weight and not counted).
int64_t Nf4Bytes(int64_t n, bool double_quant);

// Bytes per element of the adapters' weights: lora_dtype, by default the
// precision's weight dtype.
int LoraWeightBytes(const ModelConfig& c);

// Weights, gradients and optimizer state of `g`: as ModelStateBytes without
// LoRA; with it, the frozen base's weights alone (nf4 ones at Nf4Bytes) and
// the adapters' weights, gradients and optimizer state (the precision's
// convention, or all in lora_dtype when it is set, as torch.optim keeps a
// parameter's state in its dtype). Fails on overflow.
Result<StaticMemory> GraphModelState(const TransformerGraph& g, const ModelConfig& c);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_LORA_H_
