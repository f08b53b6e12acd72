#include "profiler.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "chain_model.h"
#include "device.h"
#include "host_pool.h"
#include "layer_execution.h"
#include "median.h"
#include "optimizer.h"
#include "torch_errors.h"

namespace remat::runtime {
namespace {

// One forward with grad and its backward, measured.
struct GradSample {
  double forward_ms = 0, backward_ms = 0, core_ms = 0;
  int64_t kept = 0, forward_workspace = 0, backward_workspace = 0;
  int64_t gradients = 0;  // parameter gradients the backward created
};

// The repetitions of one measurement: times as medians, bytes as maxima
// (the backward's workspace signed: it starts below any sample).
struct GradSummary {
  std::vector<double> forward_ms, backward_ms, core_ms;
  int64_t kept = 0, forward_workspace = 0, gradients = 0;
  int64_t backward_workspace = std::numeric_limits<int64_t>::min();
  void Add(const GradSample& s) {
    gradients = std::max(gradients, s.gradients);
    forward_ms.push_back(s.forward_ms);
    backward_ms.push_back(s.backward_ms);
    core_ms.push_back(s.core_ms);
    kept = std::max(kept, s.kept);
    forward_workspace = std::max(forward_workspace, s.forward_workspace);
    backward_workspace = std::max(backward_workspace, s.backward_workspace);
  }
};

// Everything measured about one layer.
struct LayerSamples {
  GradSummary full;
  std::vector<GradSummary> selective;  // by option (PartsOf)
  int64_t nograd_workspace = 0;
  // Backward workspace with the layer's gradients existing (-1: its
  // backward creates none, so it never adds into them).
  int64_t accumulate_workspace = -1;
};

class Profiler {
 public:
  Profiler(const ModelConfig& config, const MeasureOptions& options, const Timing& timing,
           MemoryMeter& meter)
      : config_(config), options_(options), timing_(timing), meter_(meter) {}

  Status Run(Profile* out);

 private:
  int64_t Bytes(const at::Tensor& t) const {
    // An empty tensor (a pass boundary) allocates nothing.
    if (!t.defined() || t.storage().nbytes() == 0) return 0;
    return meter_.AllocationBytes(static_cast<int64_t>(t.storage().nbytes()));
  }
  // `option`: -1 a full forward, else a selective option (PartsOf).
  GradSample MeasureGrad(int layer, const at::Tensor& x, int option);
  // The layer's forward and backward again, with the gradients its last
  // measured backward created still there: the backward's workspace when it
  // adds into existing gradients (micro-batches 2..K of an update).
  int64_t MeasureAccumulate(int layer, const at::Tensor& x);
  // Gradients created in backward: sets to None those that layer `layer`'s
  // last measured backward created, so that the next one creates them again.
  void ReleaseCreated(int layer);
  // One repetition of every measurement of `layer` on its input `x`,
  // recorded in `out` when `timed`.
  void MeasureRound(int layer, const at::Tensor& x, bool timed, LayerSamples* out);
  LayerProfile Summarize(int layer, const LayerSamples& samples, const at::Tensor& input,
                         const at::Tensor& output) const;
  // The link activation offload copies over, as the executor runs it.
  HostLink MeasureHostLink(const at::Tensor& checkpoint);
  // Median milliseconds of one copy of `t`'s bytes into a host pool and
  // back (each direction timed as the executor's kOffload and kPrefetch).
  double CopyMs(HostPool& pool, const at::Tensor& t);
  // A time over its repetitions: the median, or the fastest (options_.statistic).
  double Time(const std::vector<double>& samples) const {
    if (options_.statistic != "min") return Median(samples);
    return samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end());
  }

  const ModelConfig& config_;
  const MeasureOptions& options_;
  Timing timing_;
  MemoryMeter& meter_;
  std::unique_ptr<ChainModel> model_;
  at::Tensor batch_;
  // Separate text passes: each skipping head's sentence embeddings (by
  // layer), the loss's other inputs.
  std::vector<at::Tensor> skips_;
  std::vector<at::Tensor> SkipsFor(int layer) const {
    std::vector<at::Tensor> skips;
    if (layer + 1 < model_->num_layers()) return skips;
    for (const at::Tensor& t : skips_) {
      if (t.defined()) skips.push_back(t);
    }
    return skips;
  }
  std::vector<std::vector<int>> created_;  // layer -> parameters its backward created .grad of
};

void Profiler::ReleaseCreated(int layer) {
  for (int k : created_[layer]) model_->parameters()[k].mutable_grad().reset();
  created_[layer].clear();
}

GradSample Profiler::MeasureGrad(int layer, const at::Tensor& x, int option) {
  const DropoutSeeds seeds = SeedsFor(options_.seed, 0, layer);
  GradSample s;
  const int64_t before = meter_.current_bytes();
  meter_.ResetPeak();
  const DeviceClock forward_clock(timing_);
  SavedLayer saved =
      ForwardWithGrad(*model_, layer, x, batch_, seeds, option, timing_, SkipsFor(layer));
  s.forward_ms = forward_clock.ElapsedMs();
  const int64_t after = meter_.current_bytes();
  s.kept = after - before;
  s.forward_workspace = meter_.peak_bytes() - after;

  // The output's gradient, as the next layer's backward would have left it.
  at::Tensor grad_output;
  if (layer + 1 < model_->num_layers()) grad_output = at::ones_like(saved.output);
  // Gradients created in backward: this backward creates the layer's
  // gradients but those a layer measured before it in the round created
  // (a tied weight counts at the head, whose backward runs first).
  ReleaseCreated(layer);
  const std::vector<at::Tensor>& params = model_->parameters();
  std::vector<char> had(params.size());
  for (size_t k = 0; k < params.size(); ++k) had[k] = params[k].grad().defined();
  const int64_t live = meter_.current_bytes();
  meter_.ResetPeak();
  const DeviceClock backward_clock(timing_);
  std::vector<at::Tensor> skip_grads;
  at::Tensor input_grad = Backward(*model_, saved, grad_output, &s.core_ms, &skip_grads);
  s.backward_ms = backward_clock.ElapsedMs();
  for (size_t k = 0; k < params.size(); ++k) {
    if (had[k] || !params[k].grad().defined()) continue;
    s.gradients += Bytes(params[k].grad());
    created_[layer].push_back(static_cast<int>(k));
  }
  // The skips' gradients live on after the loss's backward (skip_bytes).
  s.backward_workspace = meter_.peak_bytes() - live - Bytes(input_grad) - s.gradients;
  for (const at::Tensor& g : skip_grads) s.backward_workspace -= Bytes(g);
  return s;
}

int64_t Profiler::MeasureAccumulate(int layer, const at::Tensor& x) {
  SavedLayer saved = ForwardWithGrad(*model_, layer, x, batch_, SeedsFor(options_.seed, 0, layer),
                                     -1, timing_, SkipsFor(layer));
  at::Tensor grad_output;
  if (layer + 1 < model_->num_layers()) grad_output = at::ones_like(saved.output);
  const int64_t live = meter_.current_bytes();
  meter_.ResetPeak();
  std::vector<at::Tensor> skip_grads;
  at::Tensor input_grad = Backward(*model_, saved, grad_output, nullptr, &skip_grads);
  int64_t workspace = meter_.peak_bytes() - live - Bytes(input_grad);
  for (const at::Tensor& g : skip_grads) workspace -= Bytes(g);
  return std::max<int64_t>(0, workspace);
}

void Profiler::MeasureRound(int layer, const at::Tensor& x, bool timed, LayerSamples* out) {
  const GradSample full = MeasureGrad(layer, x, -1);
  if (timed) out->full.Add(full);
  // Once (its bytes do not vary between repetitions; it costs a forward and
  // a backward).
  if (timed && out->accumulate_workspace < 0 && !created_[layer].empty()) {
    out->accumulate_workspace = MeasureAccumulate(layer, x);
  }
  if (model_->layer_kind(layer) == LayerKind::kBlock) {
    out->selective.resize(model_->selective_options());
    for (int k = 0; k < model_->selective_options(); ++k) {
      const GradSample selective = MeasureGrad(layer, x, k);
      if (timed) out->selective[k].Add(selective);
    }
  }
  const int64_t before = meter_.current_bytes();
  meter_.ResetPeak();
  const at::Tensor output =
      ForwardNoGrad(*model_, layer, x, batch_, SeedsFor(options_.seed, 0, layer), SkipsFor(layer));
  if (timed) {
    out->nograd_workspace =
        std::max(out->nograd_workspace, meter_.peak_bytes() - before - Bytes(output));
  }
}

LayerProfile Profiler::Summarize(int layer, const LayerSamples& m, const at::Tensor& input,
                                 const at::Tensor& output) const {
  LayerProfile l;
  l.name = model_->layer_name(layer);
  switch (model_->layer_kind(layer)) {
    case LayerKind::kEmbedding:
      l.kind = "embedding";
      break;
    case LayerKind::kBlock:
      l.kind = "block";
      break;
    case LayerKind::kFinalNorm:
      l.kind = "norm";
      break;
    case LayerKind::kHead:
      l.kind = "head";
      break;
    case LayerKind::kLoss:
      l.kind = "loss";
      break;
  }
  l.forward_ms = Time(m.full.forward_ms);
  l.backward_ms = Time(m.full.backward_ms);
  // How far apart the repetitions were: layers that agree within it are one
  // class for the optimal solver (solver/time_classes.h).
  l.time_spread = std::max(RelativeSpread(m.full.forward_ms), RelativeSpread(m.full.backward_ms));
  l.input_bytes = Bytes(input);
  l.output_bytes = Bytes(output);
  // A head skipping to the loss keeps its sentence embeddings past its
  // forward as skip_bytes, not as what it keeps for its backward.
  if (model_->skips_to_loss(layer)) l.skip_bytes = Bytes(skips_[layer]);
  l.activation_bytes = std::max(m.full.kept - l.skip_bytes, l.output_bytes);
  l.forward_workspace_bytes = std::max<int64_t>(0, m.full.forward_workspace);
  l.forward_nograd_workspace_bytes = std::max<int64_t>(0, m.nograd_workspace);
  // Signed: autograd releases what the layer saved as its backward runs,
  // and a backward that creates its layer's gradients makes most of them
  // after that, so its peak can stay below live + input gradient +
  // gradients (LayerProfile::backward_workspace_bytes). Never below what
  // the layer saved besides its output (which the caller holds), all of
  // which it can release.
  l.backward_workspace_bytes =
      std::max(m.full.backward_workspace, -(l.activation_bytes - l.output_bytes));
  l.gradient_bytes = m.full.gradients;
  if (m.accumulate_workspace >= 0) l.accumulate_workspace_bytes = m.accumulate_workspace;
  l.keeps_input = model_->keeps_input(layer);
  // The planner's names, in the order of the model's options.
  for (size_t k = 0; k < m.selective.size(); ++k) {
    const GradSummary& sel = m.selective[k];
    SelectiveOption opt;
    opt.name = model_->OptionName(static_cast<int>(k));
    opt.activation_bytes = std::max(sel.kept, l.output_bytes);
    opt.extra_recompute_ms = Time(sel.core_ms);
    // What is recomputed runs without grad in a selective forward (the
    // attention core's s x s tensors, the activation's output): workspace
    // there, not kept bytes.
    opt.forward_workspace_bytes = std::max<int64_t>(0, sel.forward_workspace);
    opt.recompute_workspace_bytes =
        std::max<int64_t>(0, sel.backward_workspace - m.full.backward_workspace);
    l.selective.push_back(opt);
  }
  return l;
}

double Profiler::CopyMs(HostPool& pool, const at::Tensor& t) {
  constexpr int kWarmup = 1, kRepeats = 7;
  std::vector<double> ms;
  for (int r = 0; r < kWarmup + kRepeats; ++r) {
    at::Tensor x = t.clone();
    const DeviceClock out(timing_);
    pool.Offload(0, x);
    x = at::Tensor();
    const double out_ms = out.ElapsedMs();
    const DeviceClock in(timing_);
    x = pool.Prefetch(0);
    pool.AwaitPrefetch(0);
    const double in_ms = in.ElapsedMs();
    if (r >= kWarmup) ms.push_back(0.5 * (out_ms + in_ms));
  }
  return Median(ms);
}

// Copies of one element and of the checkpoint, fit to latency + bytes /
// bandwidth (HostLink::CopyMs); when noise hides the difference, all
// bandwidth at the checkpoint's size.
HostLink Profiler::MeasureHostLink(const at::Tensor& checkpoint) {
  HostPool pool(timing_.device);
  const at::Tensor one = at::zeros({1}, checkpoint.options());
  const double small_bytes = static_cast<double>(one.nbytes());
  const double big_bytes = static_cast<double>(checkpoint.nbytes());
  const double small_ms = CopyMs(pool, one);
  const double big_ms = CopyMs(pool, checkpoint);
  HostLink link;
  link.name = timing_.device.is_cuda() ? "cuda-pinned" : "cpu-memcpy";
  link.overlapped = timing_.device.is_cuda();  // the side stream
  double bytes_per_ms = big_bytes / std::max(big_ms, 1e-6);
  double latency_ms = 0;
  if (big_ms > small_ms && big_bytes > small_bytes) {
    bytes_per_ms = (big_bytes - small_bytes) / (big_ms - small_ms);
    latency_ms = std::max(0.0, small_ms - small_bytes / bytes_per_ms);
  }
  // Within what a profile accepts (profile.h HostLink; gb_per_s <= 1e6).
  link.gb_per_s = std::min(bytes_per_ms * 1e-6, 1e5);
  link.latency_us = latency_ms * 1e3;
  return link;
}

Status Profiler::Run(Profile* out) {
  Profile& p = *out;
  p.model = config_.name;
  const c10::Device& device = timing_.device;
  p.source = device.is_cuda() ? "libtorch-cuda" : "libtorch-cpu";
  p.device = DeviceDescription(device);
  if (timing_.clock == ClockKind::kThreadCpu) p.device += ", thread CPU time";
  if (options_.statistic == "min") p.device += ", fastest of " + std::to_string(options_.repeats);
  p.micro_batch = config_.micro_batch;
  p.seq_len = config_.seq_len;
  std::unique_ptr<ModelOptimizer> optimizer;
  REMAT_RETURN_IF_ERROR(CatchTorchErrors("building the model", meter_, [&] {
    const int64_t start = meter_.current_bytes();
    model_ = MakeChainModel(config_, device, options_.seed);
    const int64_t weights = meter_.current_bytes();
    // Persistent buffers are model state; else each backward creates its
    // layer's gradients (LayerProfile::gradient_bytes).
    if (model_->persistent_gradients()) model_->AllocateGradients();
    const int64_t grads = meter_.current_bytes();
    optimizer = std::make_unique<ModelOptimizer>(config_.optimizer, model_->parameters(),
                                                 SettingsFor(config_, 1));
    const int64_t state = meter_.current_bytes();
    // The buffers (the causal mask, rotary tables) apart from the weights.
    const int64_t buffers = model_->buffer_bytes();
    p.static_memory = {weights - start - buffers, grads - weights, state - grads, buffers};
    p.parameters = model_->parameter_count();
    p.grad_accumulation = config_.grad_accumulation;
    batch_ = model_->MakeBatch(options_.seed, 0);
  }));
  const int64_t settled = meter_.current_bytes();
  // Every layer's input: the batch run forward without grad.
  const int L = model_->num_layers();
  std::vector<at::Tensor> x(L + 1);
  x[0] = batch_;
  REMAT_RETURN_IF_ERROR(CatchTorchErrors("profiling (inputs)", meter_, [&] {
    skips_.assign(L, at::Tensor());
    for (int i = 0; i < L; ++i) {
      x[i + 1] =
          ForwardNoGrad(*model_, i, x[i], batch_, SeedsFor(options_.seed, 0, i), SkipsFor(i));
      if (model_->skips_to_loss(i)) {
        skips_[i] = x[i + 1];
        x[i + 1] = model_->PassBoundary();
      }
    }
  }));
  // Round robin over the layers, so that every layer's repetitions spread
  // over the whole run and see the same machine (a shared CPU's load
  // changes by the second).
  std::vector<LayerSamples> samples(L);
  const int rounds = options_.warmup + options_.repeats;
  const int64_t total = static_cast<int64_t>(rounds) * L + 1;  // + the optimizer step
  ReportProgress(options_.progress, "profiling", 0, total);
  created_.assign(L, {});
  for (int r = 0; r < rounds; ++r) {
    // Each round measures the layers as a backward meets them, last first,
    // from no gradients (created in backward) or the persistent buffers.
    if (!model_->persistent_gradients()) model_->ReleaseGradients();
    created_.assign(L, {});
    for (int i = L - 1; i >= 0; --i) {
      REMAT_RETURN_IF_ERROR(
          CatchTorchErrors("profiling layer '" + model_->layer_name(i) + "'", meter_,
                           [&] { MeasureRound(i, x[i], r >= options_.warmup, &samples[i]); }));
      ReportProgress(options_.progress, "profiling", static_cast<int64_t>(r) * L + (L - i), total,
                     model_->layer_name(i));
    }
  }
  for (int i = 0; i < L; ++i) p.layers.push_back(Summarize(i, samples[i], x[i], x[i + 1]));
  // The link, on the largest checkpoint x[1..L-1] (an offload moves one).
  int largest = 0;
  for (int i = 1; i < L; ++i) {
    if (largest == 0 || x[i].nbytes() > x[largest].nbytes()) largest = i;
  }
  if (largest > 0 && x[largest].nbytes() > 0) {
    REMAT_RETURN_IF_ERROR(CatchTorchErrors("measuring the host link", meter_,
                                           [&] { p.host_link = MeasureHostLink(x[largest]); }));
  }
  x.clear();
  skips_.clear();
  if (!model_->persistent_gradients()) model_->ReleaseGradients();  // the last round's
  std::vector<double> step_ms;
  REMAT_RETURN_IF_ERROR(CatchTorchErrors("timing the optimizer step", meter_, [&] {
    for (int r = 0; r < options_.warmup + options_.repeats; ++r) {
      model_->AllocateGradients();  // the step sets them to None
      // Its temporaries: the peak above the model state with the gradients.
      const int64_t before = meter_.current_bytes();
      meter_.ResetPeak();
      const DeviceClock clock(timing_);
      optimizer->Step();
      if (r >= options_.warmup) step_ms.push_back(clock.ElapsedMs());
      p.optimizer_workspace_bytes =
          std::max(p.optimizer_workspace_bytes, meter_.peak_bytes() - before);
    }
    // The step sets the gradients to None; persistent buffers come back.
    if (model_->persistent_gradients()) model_->AllocateGradients();
  }));
  // What libraries keep after first use stays for the whole run: count it
  // with the parameters. Measured after a whole step's kinds of work (the
  // forwards, backwards and optimizer steps above): on an H200 with LibTorch
  // 2.11, 64 MiB of cuBLAS workspace held in the caching allocator from the
  // first GEMM on (a train run's peak carried it; a profile that measured
  // this before the optimizer step missed it); on CPU nothing.
  p.static_memory.parameter_bytes += std::max<int64_t>(0, meter_.current_bytes() - settled);
  p.optimizer_ms = config_.optimizer == Optimizer::kNone ? 0 : Time(step_ms);
  ReportProgress(options_.progress, "profiling", total, total, "optimizer step");
  return ValidateProfile(p, "measured profile");
}

}  // namespace

Result<Profile> MeasureProfile(const ModelConfig& config, const MeasureOptions& options,
                               const Timing& timing, MemoryMeter& meter) {
  REMAT_RETURN_IF_ERROR(ValidateMeasureOptions(options));
  Profile profile;
  Profiler profiler(config, options, timing, meter);
  REMAT_RETURN_IF_ERROR(profiler.Run(&profile));
  return profile;
}

}  // namespace remat::runtime
