#include "analytic/optimizer_state.h"

#include "analytic/lora.h"
#include "remat/io/checked_math.h"
#include "remat/model/precision.h"

namespace remat::analytic {

bool BitsAndBytes8bit(Optimizer o) {
  return o == Optimizer::kAdamW8bit || o == Optimizer::kPagedAdamW8bit;
}

bool StatePerTensor(Optimizer o) {
  switch (o) {
    case Optimizer::kAdafactor:
    case Optimizer::kMuon:
    case Optimizer::kAdamW8bit:
    case Optimizer::kPagedAdamW8bit:
    case Optimizer::kTorchaoAdamW8bit:
    case Optimizer::kTorchaoAdamW4bit:
    case Optimizer::kTorchaoAdamWFp8:
      return true;
    default:
      return false;
  }
}

int MomentBytes(const TrainedTensor& t, const ModelConfig& c) {
  return t.adapter && c.lora_dtype != LoraDtype::kDefault ? LoraWeightBytes(c)
                                                          : ConventionOf(c.precision).moment_bytes;
}

namespace {

constexpr int64_t kStepCounter = 4;  // a 0-dim fp32 tensor

// One torchao quantized moment of `n` elements: its codes, an fp32 scale
// per block and its quantization map.
struct TorchaoLayout {
  int64_t block;         // elements per scale
  int64_t code_divisor;  // elements per code byte
  int64_t qmap_bytes;    // the moment's own map
};

TorchaoLayout TorchaoLayoutOf(Optimizer o) {
  switch (o) {
    case Optimizer::kTorchaoAdamW4bit:
      return {128, 2, 16 * 4};
    case Optimizer::kTorchaoAdamWFp8:
      return {256, 1, 0};
    default:  // kTorchaoAdamW8bit
      return {256, 1, 256 * 4};
  }
}

CheckedInt TorchaoState(const TrainedTensor& t, int m, Optimizer o) {
  const TorchaoLayout l = TorchaoLayoutOf(o);
  const int64_t n = t.elements;
  if (n < kTorchaoMinSize || n % l.block != 0) {
    return CheckedInt(kStepCounter) + CheckedInt(n) * (2 * m);
  }
  const CheckedInt moment = CheckedInt(n / l.code_divisor) + CheckedInt(n / l.block) * 4 +
                            CheckedInt(l.qmap_bytes);
  return CheckedInt(kStepCounter) + moment * 2;
}

CheckedInt TensorState(const TrainedTensor& t, const ModelConfig& c) {
  const CheckedInt n(t.elements);
  const int m = MomentBytes(t, c);
  switch (c.optimizer) {
    case Optimizer::kAdafactor: {
      if (t.shape.size() < 2) return CheckedInt(kStepCounter) + n * m;
      const int64_t last = t.shape.back(), before = t.shape[t.shape.size() - 2];
      if (last <= 0 || before <= 0) return CheckedInt(kStepCounter);
      return CheckedInt(kStepCounter) + CheckedInt(t.elements / last + t.elements / before) * m;
    }
    case Optimizer::kMuon:
      if (t.shape.size() == 2) return n * m;
      return CheckedInt(kStepCounter) + n * (2 * m);
    case Optimizer::kAdamW8bit:
    case Optimizer::kPagedAdamW8bit:
      if (t.elements < kAdamW8bitMinSize) return n * 8;
      return n * 2 + CheckedInt((t.elements + kAdamW8bitBlock - 1) / kAdamW8bitBlock) * 8;
    case Optimizer::kTorchaoAdamW8bit:
    case Optimizer::kTorchaoAdamW4bit:
    case Optimizer::kTorchaoAdamWFp8:
      return TorchaoState(t, m, c.optimizer);
    default:
      return CheckedInt(0);
  }
}

}  // namespace

Result<int64_t> OptimizerStateBytes(const std::vector<TrainedTensor>& tensors,
                                    const ModelConfig& c) {
  const int master = ConventionOf(c.precision).master_weight_bytes;
  CheckedInt sum(0);
  bool quantized = false;
  for (const TrainedTensor& t : tensors) {
    if (t.elements <= 0) continue;
    // An adapter in its own dtype is stepped without master weights (lora.h).
    const bool own_dtype = t.adapter && c.lora_dtype != LoraDtype::kDefault;
    sum = sum + TensorState(t, c) + CheckedInt(t.elements) * (own_dtype ? 0 : master);
    quantized = quantized || t.elements >= kAdamW8bitMinSize;
  }
  if (BitsAndBytes8bit(c.optimizer) && quantized) sum = sum + kAdamW8bitQuantMaps;
  if (!sum.ok()) return Status::Invalid("optimizer state bytes overflow 64-bit arithmetic");
  return sum.value();
}

}  // namespace remat::analytic
