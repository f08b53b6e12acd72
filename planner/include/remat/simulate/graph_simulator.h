// The training step of a graph profile (graph_profile.h), simulated: every
// chain's forward in the graph's order, then every chain's backward in the
// reverse order, then one optimizer step over all parameters.
//
// Each chain runs its own schedule (schedule.h), split where its first
// backward or recompute starts: the forward part runs in the forward pass
// of the graph, the rest (its optimizer step aside) in the backward pass.
// Memory at any op is the chain's own (Simulate, simulator.h) plus what the
// other chains hold at that moment (their batch input before their
// forward, what their forward kept after it, what is left after their
// backward: the parameter gradients), plus every chain's model state.
// A tensor that crosses chains is the source chain's output x[L]:
//   - it is live from the source's last forward until the backward of its
//     last reader has run (the source's own backward of layer L-1 does not
//     read its output: that is the loss's convention only), then freed;
//   - its gradient is made by the first reader's backward (in the step's
//     order), held while every later reader adds into it (each of those
//     backwards makes its part as a transient of the same size at its peak,
//     then adds it in place), and read by the source's backward of layer
//     L-1, after which it is freed.
// The optimizer step runs once: its peak is everything left plus the sum of
// the chains' optimizer workspaces. The step time is the sum of the chains'
// step times (each with its optimizer time).
#ifndef REMAT_GRAPH_SIMULATOR_H_
#define REMAT_GRAPH_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "remat/io/status.h"
#include "remat/profile/graph_profile.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"

namespace remat {

// One op of the graph's step: chain `chain`'s op `op` (an index into its
// schedule), or the optimizer step (chain -1, op -1).
struct GraphPoint {
  int chain = -1;
  int op = -1;
  int64_t live_before = 0;  // bytes, the whole graph's model state included
  int64_t peak = 0;
  int64_t live_after = 0;
};

struct GraphSimulationResult {
  int64_t peak_bytes = 0;  // max over the step of GraphPoint::peak
  int peak_chain = -1;     // where it is first reached (-1: the optimizer step)
  int peak_op = -1;
  int64_t static_bytes = 0;           // every chain's model state
  int64_t activation_peak_bytes = 0;  // peak_bytes - static_bytes
  double step_ms = 0;
  double recompute_ms = 0;
  // Each chain's schedule simulated on its own (its own model state only).
  std::vector<SimulationResult> chains;
  // Per chain, bytes its own simulation holds (model state aside) before
  // its forward (its batch input), after its forward part (what it keeps
  // for its backward, its output included) and after its backward (the
  // parameter gradients it made).
  std::vector<int64_t> start_bytes, forward_kept_bytes, end_bytes;
  // The step op by op, in the order it runs (empty under kTotals).
  std::vector<GraphPoint> timeline;
};

// Simulates one training step of `graph` with `schedules[c]` the schedule of
// chain c (one per chain, each valid for its chain: ValidateSchedule).
// Fails (kInvalidInput) on a schedule count that differs from the chains',
// or an invalid schedule.
Result<GraphSimulationResult> SimulateGraph(const GraphProfile& graph,
                                            const std::vector<Schedule>& schedules,
                                            SimulationDetail detail = SimulationDetail::kFull);

}  // namespace remat

#endif  // REMAT_GRAPH_SIMULATOR_H_
