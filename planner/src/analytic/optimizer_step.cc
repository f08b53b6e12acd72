#include "analytic/optimizer_step.h"

#include "analytic/lora.h"
#include "remat/io/checked_math.h"
#include "remat/model/precision.h"

namespace remat::analytic {

StepWorkspace OptimizerStepWorkspace(const std::vector<TrainedTensor>& tensors,
                                     const ModelConfig& c, bool foreach) {
  const PrecisionConvention& convention = ConventionOf(c.precision);
  if (c.optimizer != Optimizer::kAdamW || convention.master_weight_bytes > 0) return {};
  // The moments' dtype: the parameter's (torch.optim keeps a parameter's
  // state in its dtype); a LoRA adapter's, lora_dtype where it is set.
  auto moment_bytes = [&](const TrainedTensor& t) {
    return t.adapter && c.lora_dtype != LoraDtype::kDefault ? LoraWeightBytes(c)
                                                            : convention.moment_bytes;
  };
  StepWorkspace w;
  if (foreach) {
    CheckedInt sum(0);
    for (const TrainedTensor& t : tensors) {
      const CheckedInt d = CheckedInt(t.elements) * moment_bytes(t);
      if (d.ok() && d.value() > 0) w.tensors.push_back(d.value());
      sum = sum + d;
    }
    if (!sum.ok()) return {};
    w.bytes = sum.value();
    return w;
  }
  int64_t previous = 0;
  for (const TrainedTensor& t : tensors) {
    const CheckedInt d = CheckedInt(t.elements) * moment_bytes(t);
    const CheckedInt at = CheckedInt(previous) + d + d;
    if (!at.ok()) return {};
    if (at.value() > w.bytes) {
      w.bytes = at.value();
      w.tensors.clear();
      for (int64_t b : {previous, d.value(), d.value()}) {
        if (b > 0) w.tensors.push_back(b);
      }
    }
    previous = d.value();
  }
  return w;
}

}  // namespace remat::analytic
