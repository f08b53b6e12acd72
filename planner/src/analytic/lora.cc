#include "analytic/lora.h"

#include "analytic/optimizer_state.h"

#include "remat/analytic/analytic.h"
#include "remat/io/checked_math.h"
#include "remat/model/precision.h"

namespace remat::analytic {

int64_t Nf4Bytes(int64_t n, bool double_quant) {
  const int64_t blocks = (n + kNf4BlockSize - 1) / kNf4BlockSize;
  const int64_t packed = (n + 1) / 2, code = 16 * 4;
  if (!double_quant) return packed + code + 4 * blocks;
  const int64_t nested = (blocks + kNf4NestedBlocks - 1) / kNf4NestedBlocks;
  return packed + code + blocks + 4 * nested + 4;
}

int LoraWeightBytes(const ModelConfig& c) {
  switch (c.lora_dtype) {
    case LoraDtype::kFp32:
      return 4;
    case LoraDtype::kBf16:
    case LoraDtype::kFp16:
      return 2;
    case LoraDtype::kDefault:
      break;
  }
  return ConventionOf(c.precision).weight_bytes;
}

namespace {

Result<StaticMemory> ModelStateByParameter(const TransformerGraph& g, const ModelConfig& c) {
  if (c.lora_rank == 0) {
    return ModelStateBytes(g.parameters, g.trainable_parameters, c.precision, c.optimizer,
                           c.grad_dtype);
  }
  const BytesPerParameter base = ModelStatePerParameter(c.precision, c.optimizer, c.grad_dtype);
  BytesPerParameter adapter = base;
  if (c.lora_dtype != LoraDtype::kDefault) {
    const int b = LoraWeightBytes(c);
    const int moments = c.optimizer == Optimizer::kAdamW         ? 2
                        : c.optimizer == Optimizer::kSgdMomentum ? 1
                                                                 : 0;
    adapter = {b, b, moments * b};
  }
  // Every count is at most g.parameters, so the difference cannot overflow.
  const CheckedInt frozen(g.parameters - g.adapter_parameters - g.quantized_parameters);
  const CheckedInt adapters(g.adapter_parameters), trained(g.trainable_parameters);
  const CheckedInt weights =
      frozen * base.weights + CheckedInt(g.quantized_bytes) + adapters * adapter.weights;
  const CheckedInt grads = trained * adapter.gradients, optimizer = trained * adapter.optimizer;
  if (!(weights + grads + optimizer).ok()) {
    return Status::Invalid("model state bytes overflow 64-bit arithmetic");
  }
  return StaticMemory{weights.value(), grads.value(), optimizer.value()};
}

}  // namespace

Result<StaticMemory> GraphModelState(const TransformerGraph& g, const ModelConfig& c) {
  REMAT_ASSIGN_OR_RETURN(StaticMemory state, ModelStateByParameter(g, c));
  if (StatePerTensor(c.optimizer)) {
    REMAT_ASSIGN_OR_RETURN(state.optimizer_bytes, OptimizerStateBytes(g.trained_tensors, c));
  }
  return state;
}

}  // namespace remat::analytic
