#include "remat/model/precision.h"

namespace remat {

const std::vector<PrecisionConvention>& PrecisionConventions() {
  static const std::vector<PrecisionConvention> kTable = {
      {Precision::kFp32, 4, 0, 4, 4, 4, false, false, "everything in fp32"},
      {Precision::kBf16, 2, 0, 2, 2, 2, false, false,
       "pure bf16: weights, gradients, moments and activations in bf16"},
      {Precision::kFp16, 2, 0, 2, 2, 2, false, false,
       "pure fp16: everything in fp16, no loss scaling (GradScaler refuses fp16 gradients)"},
      {Precision::kAmpBf16, 4, 0, 4, 4, 2, true, false,
       "torch.autocast(bf16): fp32 weights, gradients and moments; bf16 copies inside autocast"},
      {Precision::kAmpFp16, 4, 0, 4, 4, 2, true, true,
       "torch.autocast(fp16) with GradScaler: fp32 weights, gradients and moments"},
      {Precision::kMixedBf16, 2, 4, 4, 4, 2, false, false,
       "Megatron/DeepSpeed bf16: bf16 weights, fp32 master weights and moments"},
      {Precision::kMixedFp16, 2, 4, 4, 4, 2, false, true,
       "Megatron/DeepSpeed fp16: fp16 weights, fp32 master weights and moments, loss scaler"},
  };
  return kTable;
}

const PrecisionConvention& ConventionOf(Precision precision) {
  return PrecisionConventions()[static_cast<int>(precision)];
}

int GradientBytes(Precision precision, GradDtype grad_dtype) {
  if (grad_dtype == GradDtype::kDefault) return ConventionOf(precision).grad_bytes;
  return grad_dtype == GradDtype::kFp32 ? 4 : 2;
}

std::string GradDtypeProblem(Precision precision, GradDtype grad_dtype) {
  if (grad_dtype == GradDtype::kDefault) return "";
  const bool mixed = precision == Precision::kMixedBf16 || precision == Precision::kMixedFp16;
  const GradDtype half = precision == Precision::kMixedFp16 || precision == Precision::kFp16
                             ? GradDtype::kFp16
                             : GradDtype::kBf16;
  if (mixed) {
    if (grad_dtype == GradDtype::kFp32 || grad_dtype == half) return "";
    return std::string("mixed precision keeps gradients in fp32 or ") + ToString(half);
  }
  const GradDtype own = ConventionOf(precision).grad_bytes == 4 ? GradDtype::kFp32 : half;
  if (grad_dtype == own) return "";
  return std::string("PyTorch keeps gradients in the weights' dtype (") + ToString(own) +
         "); gradients in another dtype need master weights: use mixed_bf16 or mixed_fp16";
}

}  // namespace remat
