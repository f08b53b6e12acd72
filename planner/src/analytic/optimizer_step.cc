#include "analytic/optimizer_step.h"

#include "analytic/lora.h"
#include "remat/io/checked_math.h"
#include "remat/model/precision.h"

namespace remat::analytic {

StepWorkspace OptimizerStepWorkspace(const std::vector<TrainedTensor>& tensors,
                                     const ModelConfig& c, bool foreach) {
  const PrecisionConvention& convention = ConventionOf(c.precision);
  if (convention.master_weight_bytes > 0) return {};
  if (c.optimizer == Optimizer::kSgdMomentum && !foreach) {
    // buf.mul_(momentum): its scalar, a 0-dim double tensor cast to the
    // buffer's dtype.
    const int64_t cast = convention.moment_bytes == 8 ? 0 : convention.moment_bytes;
    return tensors.empty() ? StepWorkspace{} : StepWorkspace{8 + cast, {8, cast}};
  }
  if (c.optimizer != Optimizer::kAdamW) return {};
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
    const int bytes = moment_bytes(t);
    const CheckedInt d = CheckedInt(t.elements) * bytes;
    // The division's scalar operand: ATen wraps it in a 0-dim double
    // tensor and casts that to the tensor's dtype, beside the quotient.
    const int64_t wrapped = 8, cast = bytes == 8 ? 0 : bytes;
    const CheckedInt at = CheckedInt(previous) + d + d + wrapped + cast;
    if (!at.ok()) return {};
    if (t.elements > 0 && at.value() > w.bytes) {
      w.bytes = at.value();
      w.tensors.clear();
      for (int64_t b : {previous, d.value(), d.value(), wrapped, cast}) {
        if (b > 0) w.tensors.push_back(b);
      }
    }
    previous = d.value();
  }
  return w;
}

}  // namespace remat::analytic
