#include "device.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <time.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdlib>

#include "memory_meter.h"
#include "remat/model/precision.h"

namespace remat::runtime {

Result<c10::Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::DeviceType::CPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (name.size() > 5) {
      const std::string digits = name.substr(5);
      if (digits.empty() || digits.size() > 3 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        return Status::Invalid("bad device '" + name + "', expected cpu, cuda or cuda:N");
      }
      index = std::stoi(digits);
    }
    // MakeCudaMeter explains what is missing (a CUDA build, a visible GPU).
    REMAT_ASSIGN_OR_RETURN(std::unique_ptr<MemoryMeter> probe, MakeCudaMeter(index));
    (void)probe;
    return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
  }
  return Status::Invalid("unknown device '" + name + "', expected cpu, cuda or cuda:N");
}

void Synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::string DeviceDescription(const c10::Device& device) {
  if (!device.is_cuda()) return "cpu";
  Result<std::string> name = CudaDeviceName(device.index());
  return name.ok() ? *name : "cuda";
}

Result<ClockKind> ParseClock(const std::string& name, const c10::Device& device) {
  if (name == "wall") return ClockKind::kWall;
  if (name != "thread") {
    return Status::Invalid("unknown clock '" + name + "', expected wall or thread");
  }
  if (!device.is_cpu()) {
    return Status::Invalid(
        "--clock thread times CPU runs only; GPU work is timed on the wall "
        "clock");
  }
  // PyTorch's wheel does its BLAS with MKL, which follows LibTorch's
  // intra-op thread count (OMP_NUM_THREADS); a LibTorch on OpenBLAS also
  // needs OPENBLAS_NUM_THREADS=1, which the scripts set too.
  if (at::get_num_threads() != 1) {
    return Status::Invalid(
        "--clock thread counts the calling thread's CPU time, so the work must "
        "stay on it: run with OMP_NUM_THREADS=1 (and OPENBLAS_NUM_THREADS=1) "
        "(LibTorch has " +
        std::to_string(at::get_num_threads()) + " intra-op threads)");
  }
  return ClockKind::kThreadCpu;
}

DeviceClock::DeviceClock(const Timing& timing) : timing_(timing) {
  Synchronize(timing_.device);
  start_ms_ = Now();
}

double DeviceClock::ElapsedMs() const {
  Synchronize(timing_.device);
  return Now() - start_ms_;
}

double DeviceClock::Now() const {
  if (timing_.clock == ClockKind::kThreadCpu) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// The dtype matmuls run in: the weights' for bf16/fp16, autocast's for amp_*.
c10::ScalarType ComputeDtype(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
    case Precision::kAmpBf16:
    case Precision::kMixedBf16:
      return at::kBFloat16;
    case Precision::kFp16:
    case Precision::kAmpFp16:
    case Precision::kMixedFp16:
      return at::kHalf;
    case Precision::kFp32:
      break;
  }
  return at::kFloat;
}

}  // namespace

Status DeviceRuns(const ModelConfig& config, const c10::Device& device) {
  switch (config.optimizer) {
    case Optimizer::kAdafactor:
    case Optimizer::kMuon:
    case Optimizer::kAdamW8bit:
    case Optimizer::kPagedAdamW8bit:
    case Optimizer::kTorchaoAdamW8bit:
    case Optimizer::kTorchaoAdamW4bit:
    case Optimizer::kTorchaoAdamWFp8:
      return Status::Invalid(std::string("optimizer '") + ToString(config.optimizer) +
                             "': remat's runtime steps adamw, sgd, sgd_momentum or none (the "
                             "others are planned for torch.optim, bitsandbytes and torchao on the "
                             "user's model: remat.apply)");
    default:
      break;
  }
  const c10::ScalarType dtype = ComputeDtype(config.precision);
  if (dtype == at::kFloat) return Status::Ok();
  const bool autocast = ConventionOf(config.precision).autocast;
  if (autocast && !at::autocast::is_autocast_available(device.type())) {
    return Status::Invalid(std::string("precision '") + ToString(config.precision) +
                           "': this LibTorch has no autocast on " + DeviceDescription(device));
  }
  try {
    c10::AutoGradMode grad(true);
    const auto weights = at::TensorOptions().device(device).dtype(autocast ? at::kFloat : dtype);
    const at::Tensor x = at::randn({4, 8}, weights).requires_grad_(true);
    const at::Tensor w = at::randn({8, 8}, weights).requires_grad_(true);
    at::Tensor loss;
    {
      const AutocastScope scope(config, device);
      const at::Tensor y = at::layer_norm(x, {8});
      loss = at::softmax(at::matmul(y, w), -1).sum();
    }
    loss.backward();
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    const bool cpu = device.is_cpu();
    return Status::Invalid(
        std::string("precision '") + ToString(config.precision) + "' does not run on " +
        DeviceDescription(device) + " with this LibTorch (" + what + "); " +
        (cpu ? "bf16 or amp_bf16 run here, or this precision on cuda" : "fp32 runs here"));
  }
  return Status::Ok();
}

AutocastScope::AutocastScope(const ModelConfig& config, const c10::Device& device)
    : active_(ConventionOf(config.precision).autocast), type_(device.type()) {
  if (!active_) return;
  was_enabled_ = at::autocast::is_autocast_enabled(type_);
  was_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::set_autocast_dtype(type_, ComputeDtype(config.precision));
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, was_enabled_);
  at::autocast::set_autocast_dtype(type_, was_dtype_);
}

}  // namespace remat::runtime
