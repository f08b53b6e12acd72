#include "schedule_executor.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "device.h"
#include "remat/simulate/simulator.h"
#include "torch_errors.h"

namespace remat::runtime {

ScheduleExecutor::ScheduleExecutor(const ChainModel& model, ModelOptimizer* optimizer,
                                   MemoryMeter& meter, uint64_t seed, ClockKind clock)
    : model_(model),
      optimizer_(optimizer),
      meter_(meter),
      seed_(seed),
      timing_{model.device(), clock},
      host_(model.device()) {}

Status ScheduleExecutor::Check(const Schedule& schedule, const ChainModel& model) {
  const int L = model.num_layers();
  if (schedule.num_layers != L) {
    return Status::Invalid("the schedule is for a " + std::to_string(schedule.num_layers) +
                           "-layer chain, the model has " + std::to_string(L) + " layers (" +
                           model.DescribeChain() + ")");
  }
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    const Op& op = schedule.ops[i];
    if ((op.kind == OpKind::kOffload || op.kind == OpKind::kPrefetch) &&
        (op.tensor.kind != TensorKind::kX || op.tensor.index < 1 || op.tensor.index >= L)) {
      return Status::Invalid("schedule op " + std::to_string(i) + " (" + DescribeOp(op) +
                             "): only a checkpoint x1..x" + std::to_string(L - 1) + " moves");
    }
    if (!op.on_tensor() && op.kind != OpKind::kOptimizerStep && (op.layer < 0 || op.layer >= L)) {
      return Status::Invalid("schedule op " + std::to_string(i) + " (" + DescribeOp(op) +
                             "): no such layer");
    }
    if (op.save == SaveMode::kSelective &&
        (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute)) {
      const bool block = model.layer_kind(op.layer) == LayerKind::kBlock;
      if (!block || op.option < 0 || op.option >= model.selective_options()) {
        return Status::Invalid(
            "schedule op " + std::to_string(i) + " (" + DescribeOp(op) +
            "): the runtime's selective options of a block are " +
            (model.config().experts > 0 && model.selective_options() > 1
                 ? std::string("0 (attention_core), 1 (experts) and 2 (attention_core+experts)")
             : model.selective_options() > 1
                 ? "0 (attention_core), 1 (mlp_activation), 2 (attention_core+mlp_activation), "
                   "3 (norm_output), 4 (attention_core+mlp_activation+norm_output)" +
                       (model.selective_options() > 5
                            ? std::string(", 5 (dropout_mask) and 6 (all four)")
                            : std::string(" (dropout off: no dropout_mask options)"))
                 : "0 (attention_core) for this model") +
            "; layer '" + model.layer_name(op.layer) + "'");
      }
    }
  }
  return Status::Ok();
}

const at::Tensor& ScheduleExecutor::Live(const at::Tensor& t, const char* kind, int index) const {
  if (!t.defined() && kind[0] == 'x' && host_.holds(index)) {
    throw std::invalid_argument(std::string("needs ") + kind + std::to_string(index) +
                                ", which is offloaded (no prefetch before this op)");
  }
  if (!t.defined() && !(kind[0] == 'x' && released_[index])) {
    throw std::invalid_argument(std::string("needs ") + kind + std::to_string(index) +
                                ", which is not live");
  }
  return t;
}

void ScheduleExecutor::Clear() {
  x_.clear();
  g_.clear();
  released_.clear();
  a_.clear();
  skip_.clear();
  skip_grad_.clear();
  host_.Clear();
}

// The checkpoint's storage to the host pool; x[i] was its only holder, so
// its device bytes go.
void ScheduleExecutor::Offload(int i) {
  Live(x_[i], "x", i);
  if (!x_[i].defined())
    throw std::invalid_argument("offloads x" + std::to_string(i) + ", released");
  host_.Offload(i, x_[i]);
  x_[i] = at::Tensor();
}

// Side outputs (the planner's skip_bytes): a head of a pass before the last
// hands the next pass an empty boundary as x[i+1] and keeps its sentence
// embeddings for the loss from its first forward; a recompute's are only
// needed for its own backward, which enters their graph without them.
void ScheduleExecutor::KeepSkip(const Op& op, int i) {
  const at::Tensor pooled = x_[i + 1];
  x_[i + 1] = model_.PassBoundary();
  if (op.kind == OpKind::kForward) skip_[i] = pooled;
  if (op.kind == OpKind::kRecompute && a_[i].live()) ReleaseOutput(a_[i]);
}

std::vector<at::Tensor> ScheduleExecutor::LiveSkips() const {
  std::vector<at::Tensor> skips;
  for (int j = 0; j + 1 < model_.num_layers(); ++j) {
    if (model_.skips_to_loss(j)) skips.push_back(Live(skip_[j], "skip ", j));
  }
  return skips;
}

// After the loss's backward: the skips' gradients are kept for their heads'
// backwards, the skips themselves released (also from the heads' saved
// graphs).
void ScheduleExecutor::ReleaseSkips(std::vector<at::Tensor> grads) {
  size_t k = 0;
  for (int j = 0; j + 1 < model_.num_layers(); ++j) {
    if (!model_.skips_to_loss(j)) continue;
    if (k < grads.size()) skip_grad_[j] = std::move(grads[k++]);
    skip_[j] = at::Tensor();
    if (a_[j].live()) ReleaseOutput(a_[j]);
  }
}

void ScheduleExecutor::RunOp(const Op& op, bool release_input, int64_t step, bool last_micro_batch,
                             double loss_scale, StepResult* result) {
  const int L = model_.num_layers();
  // A prefetched checkpoint's readers wait for its copy (CUDA).
  for (const TensorRef& t : ChainGraph::For(L).Reads(op)) {
    if (t.kind == TensorKind::kX) host_.AwaitPrefetch(t.index);
  }
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kRecompute: {
      const int i = op.layer;
      if (released_[i]) throw std::invalid_argument("needs x" + std::to_string(i) + ", released");
      const at::Tensor x = Live(x_[i], "x", i);
      Live(x_[0], "x", 0);  // the loss layer reads its targets from the batch
      if (x_[i + 1].defined())
        throw std::invalid_argument("writes x" + std::to_string(i + 1) + ", which is live");
      const DropoutSeeds seeds = SeedsFor(seed_, step, i);
      const std::vector<at::Tensor> skips = i == L - 1 ? LiveSkips() : std::vector<at::Tensor>();
      if (op.save == SaveMode::kNone) {
        x_[i + 1] = ForwardNoGrad(model_, i, x, x_[0], seeds, skips);
      } else {
        if (a_[i].live())
          throw std::invalid_argument("writes a" + std::to_string(i) + ", which is live");
        // x[i] still carries layer i-1's graph: run on it, then let it go.
        if (release_input && a_[i - 1].live() && a_[i - 1].output.defined() &&
            x.is_alias_of(a_[i - 1].output)) {
          a_[i] = ForwardWithGradOnProducer(model_, i, a_[i - 1], x_[0], seeds);
          x_[i] = at::Tensor();
          released_[i] = 1;
        } else {
          a_[i] = ForwardWithGrad(model_, i, x, x_[0], seeds,
                                  op.save == SaveMode::kSelective ? op.option : -1, timing_, skips);
        }
        x_[i + 1] = a_[i].output.detach();
      }
      if (model_.skips_to_loss(i)) KeepSkip(op, i);
      if (op.kind == OpKind::kForward && i == L - 1) result->loss = x_[L].item<double>();
      break;
    }
    case OpKind::kBackward: {
      const int i = op.layer;
      if (!a_[i].live())
        throw std::invalid_argument("needs a" + std::to_string(i) + ", which is not live");
      if (i == L - 1) Live(x_[L], "x", L);  // the loss; other layers' outputs may be gone
      // The loss layer starts from d(loss / K)/d(loss) = 1/K (undefined: 1).
      // A head skipping to the loss starts from its skip's gradient.
      if (i + 1 < L) Live(g_[i + 1], "g", i + 1);
      const at::Tensor grad_output = model_.skips_to_loss(i) ? Live(skip_grad_[i], "skip g", i)
                                     : i + 1 < L             ? g_[i + 1]
                                     : loss_scale != 1.0 ? at::full_like(a_[i].output, loss_scale)
                                                         : at::Tensor();
      double core_ms = 0;
      std::vector<at::Tensor> skip_grads;
      at::Tensor input_grad = Backward(model_, a_[i], grad_output, &core_ms, &skip_grads);
      result->recompute_ms += core_ms;
      if (i > 0) g_[i] = std::move(input_grad);
      if (i == L - 1) ReleaseSkips(std::move(skip_grads));
      if (model_.skips_to_loss(i)) skip_grad_[i] = at::Tensor();
      break;
    }
    case OpKind::kFree: {
      const int k = op.tensor.index;
      switch (op.tensor.kind) {
        case TensorKind::kX:
          x_[k] = at::Tensor();
          released_[k] = 0;
          host_.Release(k);
          // Its producer's graph keeps only the output's place, for the
          // backward to start from (chain_graph.h): its bytes go, unless the
          // graph saved them.
          if (k > 0 && k < L && a_[k - 1].live()) ReleaseOutput(a_[k - 1]);
          break;
        case TensorKind::kG:
          g_[k] = at::Tensor();
          break;
        case TensorKind::kA:
          a_[k] = SavedLayer();
          break;
      }
      break;
    }
    case OpKind::kOffload:
      Offload(op.tensor.index);
      break;
    case OpKind::kPrefetch: {
      const int i = op.tensor.index;
      if (x_[i].defined())
        throw std::invalid_argument("prefetches x" + std::to_string(i) + ", live");
      x_[i] = host_.Prefetch(i);
      break;
    }
    case OpKind::kOptimizerStep:
      if (optimizer_ != nullptr && last_micro_batch) {
        optimizer_->Step();  // sets the gradients to None
        if (model_.persistent_gradients()) model_.AllocateGradients();
      }
      break;
  }
}

Result<StepResult> ScheduleExecutor::RunStep(const Schedule& schedule, at::Tensor batch,
                                             int64_t step, int64_t micro, int64_t micro_batches) {
  REMAT_RETURN_IF_ERROR(Check(schedule, model_));
  if (micro_batches < 1 || micro < 0 || micro >= micro_batches) {
    return Status::Invalid("micro-batch " + std::to_string(micro) + " of " +
                           std::to_string(micro_batches) + " per update");
  }
  const bool last_micro_batch = micro + 1 == micro_batches;
  // d(loss / K)/d(loss), times the loss scaler's scale (amp_fp16).
  const double loss_scale =
      (optimizer_ != nullptr ? optimizer_->loss_scale() : 1.0) / static_cast<double>(micro_batches);
  const int L = model_.num_layers();
  x_.assign(L + 1, at::Tensor());
  g_.assign(L + 1, at::Tensor());
  released_.assign(L + 1, 0);
  std::vector<bool> keeps_input(L);
  for (int i = 0; i < L; ++i) keeps_input[i] = model_.keeps_input(i);
  const std::vector<bool> releases = InputReleasingOps(schedule, keeps_input);
  a_.assign(L, SavedLayer());
  skip_.assign(L, at::Tensor());
  skip_grad_.assign(L, at::Tensor());
  x_[0] = std::move(batch);
  host_.Clear();
  StepResult result;
  result.ops.reserve(schedule.ops.size());
  for (size_t k = 0; k < schedule.ops.size(); ++k) {
    const Op& op = schedule.ops[k];
    OpSample sample;
    sample.op_index = static_cast<int>(k);
    sample.live_before = meter_.current_bytes();
    meter_.ResetPeak();
    const DeviceClock clock(timing_);
    std::string where = "step " + std::to_string(step + 1) + ", schedule op " + std::to_string(k) +
                        " (" + DescribeOp(op);
    if (op.layer >= 0 && op.layer < L) where += ", layer '" + model_.layer_name(op.layer) + "'";
    where += ")";
    const Status status = CatchTorchErrors(where, meter_, [&] {
      RunOp(op, releases[k], step, last_micro_batch, loss_scale, &result);
    });
    if (!status.ok()) {
      Clear();
      return status;
    }
    sample.ms = clock.ElapsedMs();
    sample.peak = meter_.peak_bytes();
    sample.live_after = meter_.current_bytes();
    if (op.kind == OpKind::kRecompute) result.recompute_ms += sample.ms;
    result.ms += sample.ms;
    result.peak_bytes = std::max(result.peak_bytes, sample.peak);
    result.reserved_peak_bytes = std::max(result.reserved_peak_bytes, meter_.reserved_peak_bytes());
    result.host_peak_bytes = host_.peak_bytes();
    result.ops.push_back(sample);
  }
  result.host_left_bytes = host_.bytes();
  Clear();
  return result;
}

}  // namespace remat::runtime
