// remat::Runtime on LibTorch: Measure (the profiler) and Train (the executor).
#include "remat/runtime/torch_runtime.h"

#include <torch/version.h>

#include <algorithm>
#include <memory>

#include "chain_model.h"
#include "device.h"
#include "median.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "profiler.h"
#include "provenance.h"
#include "schedule_executor.h"
#include "torch_errors.h"

namespace remat::runtime {
namespace {

// A device and the meter that watches it.
struct MeteredDevice {
  c10::Device device{c10::DeviceType::CPU};
  MemoryMeter* meter = nullptr;
  std::unique_ptr<MemoryMeter> owned;  // the CUDA meter; the CPU one is process-wide
};

Result<MeteredDevice> OpenDevice(const std::string& name) {
  MeteredDevice d;
  REMAT_ASSIGN_OR_RETURN(d.device, ParseDevice(name));
  if (d.device.is_cuda()) {
    REMAT_ASSIGN_OR_RETURN(d.owned, MakeCudaMeter(d.device.index()));
    d.meter = d.owned.get();
  } else {
    d.meter = &CpuMeter();
  }
  return d;
}

// Removes the memory cap when a run ends, however it ends.
class LimitGuard {
 public:
  explicit LimitGuard(MemoryMeter& meter) : meter_(meter) {}
  ~LimitGuard() { (void)meter_.SetLimit(0); }
  LimitGuard(const LimitGuard&) = delete;
  LimitGuard& operator=(const LimitGuard&) = delete;

 private:
  MemoryMeter& meter_;
};

Status CheckConfig(const ModelConfig& config) {
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(config, config.name));
  return ModelSupports(config);
}

class TorchRuntime final : public Runtime {
 public:
  std::string name() const override { return std::string("libtorch ") + TORCH_VERSION; }

  Result<Profile> Measure(const ModelConfig& config, const MeasureOptions& options) override {
    REMAT_RETURN_IF_ERROR(CheckConfig(config));
    REMAT_ASSIGN_OR_RETURN(MeteredDevice d, OpenDevice(options.device));
    REMAT_ASSIGN_OR_RETURN(const ClockKind clock, ParseClock(options.clock, d.device));
    const int64_t before = d.meter->current_bytes();
    REMAT_RETURN_IF_ERROR(DeviceRuns(config, d.device));
    // What the probe's first GEMMs left behind stays for the run, as in
    // Train (which runs the same probe): on CUDA the cuBLAS workspaces of
    // the calling thread and of autograd's device thread, 32 MiB each on an
    // H200 with LibTorch 2.11, in the caching allocator. The profiler counts
    // what appears after it starts; these come before.
    const int64_t held = d.meter->current_bytes() - before;
    REMAT_RETURN_IF_ERROR(d.meter->SetLimit(0));
    REMAT_ASSIGN_OR_RETURN(Profile p,
                           MeasureProfile(config, options, Timing{d.device, clock}, *d.meter));
    p.static_memory.parameter_bytes += std::max<int64_t>(0, held);
    p.provenance = ProvenanceOf(d.device);
    return p;
  }

  Result<TrainResult> Train(const ModelConfig& config, const Schedule& schedule,
                            const TrainOptions& options) override {
    REMAT_RETURN_IF_ERROR(CheckConfig(config));
    if (options.steps < 1) return Status::Invalid("train needs at least 1 step");
    REMAT_ASSIGN_OR_RETURN(MeteredDevice d, OpenDevice(options.device));
    REMAT_ASSIGN_OR_RETURN(const ClockKind clock, ParseClock(options.clock, d.device));
    REMAT_RETURN_IF_ERROR(DeviceRuns(config, d.device));
    MemoryMeter& meter = *d.meter;
    const LimitGuard guard(meter);
    REMAT_RETURN_IF_ERROR(meter.SetLimit(options.memory_limit_bytes));

    std::unique_ptr<ChainModel> model;
    std::unique_ptr<ModelOptimizer> optimizer;
    TrainResult result;
    result.device = DeviceDescription(d.device);
    result.provenance = ProvenanceOf(d.device);
    REMAT_RETURN_IF_ERROR(CatchTorchErrors("building the model", meter, [&] {
      const int64_t start = meter.current_bytes();
      model = MakeChainModel(config, d.device, options.seed);
      // Persistent buffers now; else each backward creates its gradients.
      if (model->persistent_gradients()) model->AllocateGradients();
      optimizer = std::make_unique<ModelOptimizer>(config.optimizer, model->parameters(),
                                                   SettingsFor(config, options.steps));
      result.model_state_bytes = meter.current_bytes() - start;
    }));
    REMAT_RETURN_IF_ERROR(ScheduleExecutor::Check(schedule, *model));
    ScheduleExecutor executor(*model, optimizer.get(), meter, options.seed, clock);
    std::vector<double> step_ms, recompute_ms;
    ReportProgress(options.progress, "training", 0, options.steps);
    // A step is one optimizer step over grad_accumulation micro-batches
    // (schedule_executor.h): its loss is their mean, its time their sum,
    // its peak their highest.
    const int64_t k = config.grad_accumulation;
    for (int step = 0; step < options.steps; ++step) {
      StepResult update;
      for (int64_t micro = 0; micro < k; ++micro) {
        const int64_t index = step * k + micro;  // batches and dropout differ per micro-batch
        at::Tensor batch;
        REMAT_RETURN_IF_ERROR(
            CatchTorchErrors("step " + std::to_string(step + 1) + ", making the batch", meter,
                             [&] { batch = model->MakeBatch(options.seed, index); }));
        REMAT_ASSIGN_OR_RETURN(StepResult s,
                               executor.RunStep(schedule, std::move(batch), index, micro, k));
        update.loss += s.loss / static_cast<double>(k);
        update.ms += s.ms;
        update.recompute_ms += s.recompute_ms;
        update.peak_bytes = std::max(update.peak_bytes, s.peak_bytes);
        update.reserved_peak_bytes = std::max(update.reserved_peak_bytes, s.reserved_peak_bytes);
        update.host_peak_bytes = std::max(update.host_peak_bytes, s.host_peak_bytes);
        update.ops = std::move(s.ops);  // the last micro-batch's, with the optimizer step
      }
      const StepResult& s = update;
      const StepRecord record{step + 1, s.loss, s.peak_bytes, s.ms, s.recompute_ms};
      result.steps.push_back(record);
      result.peak_bytes = std::max(result.peak_bytes, s.peak_bytes);
      result.reserved_peak_bytes = std::max(result.reserved_peak_bytes, s.reserved_peak_bytes);
      result.host_peak_bytes = std::max(result.host_peak_bytes, s.host_peak_bytes);
      if (step > 0 || options.steps == 1) {
        step_ms.push_back(s.ms);
        recompute_ms.push_back(s.recompute_ms);
      }
      if (step + 1 == options.steps) result.ops = std::move(update.ops);
      if (options.on_step) options.on_step(record);
      ReportProgress(options.progress, "training", step + 1, options.steps,
                     "step " + std::to_string(step + 1));
    }
    result.step_ms = Median(step_ms);
    result.recompute_ms = Median(recompute_ms);
    return result;
  }
};

}  // namespace

std::unique_ptr<Runtime> MakeTorchRuntime() { return std::make_unique<TorchRuntime>(); }

}  // namespace remat::runtime
