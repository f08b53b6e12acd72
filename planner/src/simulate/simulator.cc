// The simulator's entry points (simulator.h): each validates the schedule,
// then drives replays (simulate/replay.h) over it: the in-flight
// micro-batches of a pipeline stage, one micro-step or two (gradient
// accumulation), the attribution of the peak to layers, the allocation
// events.
#include "remat/simulate/simulator.h"

#include <algorithm>

#include "simulate/replay.h"

namespace remat {

using simulate_internal::Key;
using simulate_internal::LayerOf;
using simulate_internal::LiveTensor;
using simulate_internal::Replay;

const char* ToString(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kModelState:
      return "model_state";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kRecomputed:
      return "recomputed";
    case MemoryCategory::kGradients:
      return "activation_grads";
    case MemoryCategory::kWorkspace:
      return "workspace";
    case MemoryCategory::kParameterGrads:
      return "parameter_grads";
    case MemoryCategory::kCount:
      break;
  }
  return "?";
}

std::vector<bool> InputReleasingOps(const Schedule& schedule,
                                    const std::vector<bool>& keeps_input) {
  const int n = static_cast<int>(schedule.ops.size());
  std::vector<bool> out(n, false);
  std::vector<bool> seen(keeps_input.size(), false);  // a later forward of the layer runs
  for (int k = n - 1; k >= 0; --k) {
    const Op& op = schedule.ops[k];
    if (op.kind != OpKind::kForward && op.kind != OpKind::kRecompute) continue;
    if (op.layer < 0 || op.layer >= static_cast<int>(keeps_input.size())) continue;
    if (!seen[op.layer] && op.layer > 0 && !keeps_input[op.layer] && op.save != SaveMode::kNone) {
      out[k] = true;
    }
    seen[op.layer] = true;
  }
  return out;
}

namespace {

// What the other micro-batches a pipeline stage has in flight hold
// (LayerProfile::in_flight_microbatches): for each layer, (in flight - 1)
// times what one micro-batch holds of it at its forward-to-backward turn
// (before the schedule's first backward) under the schedule: the layer's
// input x[i] and saved a[i], where on the device. The stage's output
// x[L] is not held: the stage sends it on and frees it (Megatron's
// deallocate_output_tensor); the one micro-batch's stands for the buffer
// its gradient is received into. 0 without in-flight micro-batches.
int64_t InFlightBytes(const Profile& profile, const Schedule& schedule, const ChainGraph& graph) {
  const int L = profile.num_layers();
  bool pipelined = false;
  for (const LayerProfile& l : profile.layers)
    pipelined = pipelined || l.in_flight_microbatches > 1;
  if (!pipelined) return 0;
  Replay replay(profile, schedule, graph, nullptr, false);
  SimulationResult scratch;
  TimelinePoint pt;
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    if (schedule.ops[i].kind == OpKind::kBackward) break;
    replay.Step(static_cast<int>(i), &pt, &scratch);
  }
  int64_t bytes = 0;
  for (int i = 0; i < L; ++i) {
    const int64_t others = profile.layers[i].in_flight_microbatches - 1;
    for (TensorKind kind : {TensorKind::kX, TensorKind::kA}) {
      const LiveTensor& lt = replay.live()[Key({kind, i}, L)];
      if (lt.live && (!lt.on_host || lt.leaving)) bytes += others * lt.bytes;
    }
  }
  return bytes;
}

// One micro-step: replays the schedule, with the parameter gradients created
// in backward existing from the start or not.
SimulationResult SimulateMicroStep(const Profile& profile, const Schedule& schedule,
                                   const ChainGraph& graph, const CachingAllocatorModel* allocator,
                                   bool gradients_at_start, SimulationDetail detail,
                                   int64_t in_flight_bytes) {
  const bool full = detail == SimulationDetail::kFull;
  SimulationResult r;
  r.static_bytes = profile.static_bytes();
  r.in_flight_bytes = in_flight_bytes;
  if (full) r.timeline.resize(schedule.ops.size());
  {
    Replay replay(profile, schedule, graph, allocator, gradients_at_start, nullptr,
                  in_flight_bytes);
    TimelinePoint point;  // without a timeline
    for (size_t i = 0; i < schedule.ops.size(); ++i) {
      TimelinePoint& pt = full ? r.timeline[i] : point;
      replay.Step(static_cast<int>(i), &pt, &r);
      if (pt.peak > r.peak_bytes || r.peak_op < 0) {
        r.peak_bytes = pt.peak;
        r.peak_op = static_cast<int>(i);
        r.at_peak = pt.at_peak;
      }
      r.reserved_peak_bytes = std::max(r.reserved_peak_bytes, pt.reserved);
    }
    replay.Finish();
    if (schedule.ops.empty()) {
      r.peak_bytes = profile.static_bytes() + profile.layers[0].input_bytes + in_flight_bytes;
      if (gradients_at_start) {
        r.peak_bytes += profile.total_gradient_bytes() - profile.static_memory.gradient_bytes;
      }
      r.reserved_peak_bytes = replay.reserved_now();
    }
  }
  r.activation_peak_bytes = r.peak_bytes - r.static_bytes;
  r.step_ms = r.forward_ms + r.backward_ms + r.recompute_ms + r.optimizer_ms + r.transfer_ms;
  if (!full) return r;
  // Attribute the live tensors at the peak to layers: replay up to the peak op.
  r.layer_bytes_at_peak.assign(profile.num_layers(), 0);
  if (r.peak_op >= 0) {
    Replay replay(profile, schedule, graph, allocator, gradients_at_start, nullptr,
                  in_flight_bytes);
    SimulationResult scratch;
    TimelinePoint pt;
    for (int i = 0; i <= r.peak_op; ++i) replay.Step(i, &pt, &scratch);
    const int L = profile.num_layers();
    for (int kind = 0; kind < 3; ++kind) {
      for (int idx = 0; idx <= L; ++idx) {
        const TensorRef t{static_cast<TensorKind>(kind), idx};
        const LiveTensor& lt = replay.live()[Key(t, L)];
        if (lt.live && (!lt.on_host || lt.leaving))
          r.layer_bytes_at_peak[std::min(LayerOf(t), L - 1)] += lt.bytes;
      }
    }
    for (int i = 0; i < L; ++i) r.layer_bytes_at_peak[i] += replay.side_live(i);
    for (int i = 0; i < L; ++i) {
      if (replay.has_gradients(i)) r.layer_bytes_at_peak[i] += profile.layers[i].gradient_bytes;
    }
  }
  return r;
}

}  // namespace

namespace {

Result<const ChainGraph*> ValidatedGraph(const Profile& profile, const Schedule& schedule) {
  if (schedule.num_layers != profile.num_layers()) {
    return Status::Invalid("the schedule is for " + std::to_string(schedule.num_layers) +
                           " layers but the profile has " + std::to_string(profile.num_layers()));
  }
  const ChainGraph& graph = ChainGraph::For(profile.num_layers());
  REMAT_RETURN_IF_ERROR(ValidateSchedule(schedule, profile, graph));
  return &graph;
}

}  // namespace

Result<std::vector<AllocEvent>> AllocationEvents(const Profile& profile, const Schedule& schedule,
                                                 bool gradients_at_start) {
  REMAT_ASSIGN_OR_RETURN(const ChainGraph* graph, ValidatedGraph(profile, schedule));
  std::vector<AllocEvent> events;
  events.reserve(8 * schedule.ops.size());
  Replay replay(profile, schedule, *graph, nullptr, gradients_at_start, &events,
                InFlightBytes(profile, schedule, *graph));
  SimulationResult scratch;
  TimelinePoint pt;
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    replay.Step(static_cast<int>(i), &pt, &scratch);
  }
  replay.Finish();
  return events;
}

Result<SimulationResult> Simulate(const Profile& profile, const Schedule& schedule,
                                  const CachingAllocatorModel* allocator, SimulationDetail detail) {
  REMAT_ASSIGN_OR_RETURN(const ChainGraph* graph_ptr, ValidatedGraph(profile, schedule));
  const ChainGraph& graph = *graph_ptr;
  const bool created = profile.total_gradient_bytes() > profile.static_memory.gradient_bytes;
  const int64_t in_flight = InFlightBytes(profile, schedule, graph);
  if (profile.grad_accumulation <= 1 || !created) {
    return SimulateMicroStep(profile, schedule, graph, allocator, false, detail, in_flight);
  }
  // Micro-batch 1 creates the gradients; 2..K start with them.
  SimulationResult first =
      SimulateMicroStep(profile, schedule, graph, allocator, false, detail, in_flight);
  SimulationResult later =
      SimulateMicroStep(profile, schedule, graph, allocator, true, detail, in_flight);
  SimulationResult& chosen = first.peak_bytes > later.peak_bytes ? first : later;
  chosen.reserved_peak_bytes = std::max(first.reserved_peak_bytes, later.reserved_peak_bytes);
  return std::move(chosen);
}

}  // namespace remat
