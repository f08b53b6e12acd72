#include "analytic/optimizer_step.h"

#include <algorithm>

#include "analytic/lora.h"
#include "analytic/optimizer_state.h"
#include "remat/io/checked_math.h"
#include "remat/model/precision.h"

namespace remat::analytic {

namespace {

// Records `live` (allocations adding up to the bytes then) as the peak if
// it is above the one so far.
void Peak(StepWorkspace* w, std::initializer_list<CheckedInt> live, bool* overflow) {
  CheckedInt sum(0);
  for (const CheckedInt& b : live) sum = sum + b;
  if (!sum.ok()) {
    *overflow = true;
    return;
  }
  if (sum.value() <= w->bytes) return;
  w->bytes = sum.value();
  w->tensors.clear();
  for (const CheckedInt& b : live) {
    if (b.value() > 0) w->tensors.push_back(b.value());
  }
}

StepWorkspace AdafactorWorkspace(const std::vector<TrainedTensor>& tensors,
                                 const ModelConfig& c) {
  // The loop's locals outlive their iteration until the next assignment:
  // the update (var_estimate, updated in place into `update`), the row and
  // column means of the last matrix, the squared gradient of the last
  // vector.
  CheckedInt update(0), row(0), col(0), squared(0);
  StepWorkspace w;
  bool overflow = false;
  for (const TrainedTensor& t : tensors) {
    if (t.elements <= 0) continue;
    const int m = MomentBytes(t, c);
    const CheckedInt d = CheckedInt(t.elements) * m;
    if (t.shape.size() >= 2 && t.shape.back() > 0 && t.shape[t.shape.size() - 2] > 0) {
      const CheckedInt r = CheckedInt(t.elements / t.shape.back()) * m;
      const CheckedInt k = CheckedInt(t.elements / t.shape[t.shape.size() - 2]) * m;
      Peak(&w, {update, row, col, squared, r}, &overflow);  // norm(grad, dim=-1)
      row = r;
      Peak(&w, {update, row, col, squared, k}, &overflow);  // norm(grad, dim=-2)
      col = k;
      Peak(&w, {update, row, col, squared, d}, &overflow);  // row_var @ col_var
    } else {
      Peak(&w, {update, row, col, squared, d}, &overflow);  // grad * grad
      squared = d;
      Peak(&w, {update, row, col, squared, d}, &overflow);  // variance.clone()
    }
    update = d;
  }
  return overflow ? StepWorkspace{} : w;
}

StepWorkspace MuonWorkspace(const std::vector<TrainedTensor>& matrices, const ModelConfig& c) {
  CheckedInt update(0);  // the last matrix's orthogonalized update, bf16
  StepWorkspace w;
  bool overflow = false;
  for (const TrainedTensor& t : matrices) {
    if (t.elements <= 0) continue;
    const int g = MomentBytes(t, c);  // the gradient's and the momentum's
    const int64_t q = std::min(t.shape[0], t.shape[1]);
    const CheckedInt d = CheckedInt(t.elements) * g, o = CheckedInt(t.elements) * 2;
    const CheckedInt gram = CheckedInt(q) * q * 2;
    Peak(&w, {update, d}, &overflow);  // grad.lerp(buf, momentum)
    // Newton-Schulz in bf16 (the nesterov update's copy unless it is bf16),
    // then, from the second iteration on, the previous Gram matrix and its
    // polynomial live while the next ones are made.
    const CheckedInt copy = g == 2 ? CheckedInt(0) : o;
    Peak(&w, {d, copy, gram, gram, o}, &overflow);
    Peak(&w, {d, o, gram, gram, gram}, &overflow);
    Peak(&w, {d, o, gram, gram, o}, &overflow);
    // param.add_(update): on the CPU a copy of the bf16 update in the
    // parameter's dtype.
    Peak(&w, {o, g == 2 ? CheckedInt(0) : CheckedInt(t.elements) * g}, &overflow);
    update = o;
  }
  return overflow ? StepWorkspace{} : w;
}

StepWorkspace AdamW8bitCpuWorkspace(const std::vector<TrainedTensor>& tensors,
                                    const ModelConfig& c) {
  StepWorkspace w;
  bool overflow = false;
  for (const TrainedTensor& t : tensors) {
    if (t.elements <= 0) continue;
    // Everything in fp32: the gradient's and the weight's copies (the
    // weight's none if it is fp32).
    const CheckedInt f = CheckedInt(t.elements) * 4;
    const bool fp32 = (t.adapter && c.lora_dtype != LoraDtype::kDefault
                           ? LoraWeightBytes(c)
                           : ConventionOf(c.precision).weight_bytes) == 4;
    const CheckedInt weight = fp32 ? CheckedInt(0) : f;
    if (t.elements >= kAdamW8bitMinSize) {
      // Both moments dequantized, the scaled gradient, the weight, then
      // sqrt(v) and its quotient by the bias correction.
      Peak(&w, {f, f, f, weight, f, f}, &overflow);
    } else {
      // fp32 moments in place: the scaled gradient, the weight, sqrt(v) + eps
      // and the quotient.
      Peak(&w, {f, weight, f, f}, &overflow);
    }
  }
  return overflow ? StepWorkspace{} : w;
}

}  // namespace

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
  if (c.optimizer == Optimizer::kAdafactor) return AdafactorWorkspace(tensors, c);
  if (BitsAndBytes8bit(c.optimizer)) {
    return foreach ? StepWorkspace{} : AdamW8bitCpuWorkspace(tensors, c);
  }
  if (c.optimizer == Optimizer::kMuon) {
    // Muon steps the matrices, AdamW the rest, one after the other.
    std::vector<TrainedTensor> matrices, others;
    for (const TrainedTensor& t : tensors) (t.shape.size() == 2 ? matrices : others).push_back(t);
    ModelConfig adamw = c;
    adamw.optimizer = Optimizer::kAdamW;
    const StepWorkspace muon = MuonWorkspace(matrices, c);
    const StepWorkspace rest = OptimizerStepWorkspace(others, adamw, foreach);
    return muon.bytes >= rest.bytes ? muon : rest;
  }
  if (c.optimizer != Optimizer::kAdamW) return {};
  auto moment_bytes = [&](const TrainedTensor& t) { return MomentBytes(t, c); };
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

double OptimizerStepFlops(const std::vector<TrainedTensor>& tensors, const ModelConfig& c) {
  if (c.optimizer != Optimizer::kMuon) return 0;
  constexpr int kNewtonSchulzSteps = 5;  // torch.optim.Muon's ns_steps
  double flops = 0;
  for (const TrainedTensor& t : tensors) {
    if (t.shape.size() != 2) continue;
    const double q = static_cast<double>(std::min(t.shape[0], t.shape[1]));
    const double p = static_cast<double>(std::max(t.shape[0], t.shape[1]));
    flops += kNewtonSchulzSteps * (4 * q * q * p + 2 * q * q * q);
  }
  return flops;
}

}  // namespace remat::analytic
