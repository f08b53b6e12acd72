// Schedule: the plan as data. A list of ops over the tensors of a chain.
//
// Tensors of an L-layer chain:
//   x[i], i in [0, L]   activations between layers; x[0] is the batch (live at
//                       the start), x[i+1] is layer i's output (output_bytes).
//   a[i], i in [0, L)   what layer i keeps for its backward besides its output:
//                       activation_bytes - output_bytes (or the selective
//                       option's bytes - output_bytes).
//   g[i], i in [1, L)   the gradient with respect to x[i] (input_bytes of layer
//                       i). The loss gradient g[L] is a scalar and not
//                       modelled; no gradient flows into the batch x[0].
//
// Which tensors an op reads and writes comes from the chain's autograd graph
// (chain_graph.h); a tensor is freed by an explicit kFree op after its last
// read (AddFrees). The simulator and the LibTorch runtime execute the same
// list, so predicted and measured timelines line up op by op.
#ifndef REMAT_SCHEDULE_H_
#define REMAT_SCHEDULE_H_

#include <string>
#include <string_view>
#include <vector>

#include "remat/io/status.h"

namespace remat {

struct Profile;

enum class OpKind {
  kForward,        // first forward of a layer in this step
  kRecompute,      // a forward of a layer that already ran forward in this step
  kBackward,       // the layer's backward
  kFree,           // release one tensor
  kOptimizerStep,  // the optimizer update after the last backward
  // Activation offload (HostLink, profile.h). Only a checkpoint can move: an
  // x[i], 1 <= i < L, written by a forward or recompute without grad, while
  // a[i] is not live (nothing else holds it). kOffload copies it to host
  // memory and releases its device bytes; until a kPrefetch copies it back
  // nothing may read it. A kFree of a tensor on host releases its host bytes.
  kOffload,
  kPrefetch,
};

// How a forward (or recompute) keeps its activations.
enum class SaveMode {
  kNone,       // no grad: only the output x[i+1] is produced
  kAll,        // with grad: keeps a[i] (activation_bytes - output_bytes)
  kSelective,  // with grad, selective option `option`: keeps less, recomputes in backward
};

enum class TensorKind { kX, kA, kG };

struct TensorRef {
  TensorKind kind = TensorKind::kX;
  int index = 0;
  bool operator==(const TensorRef& o) const { return kind == o.kind && index == o.index; }
};

struct Op {
  OpKind kind = OpKind::kForward;
  int layer = -1;                   // kForward, kRecompute, kBackward
  SaveMode save = SaveMode::kNone;  // kForward, kRecompute
  int option = -1;                  // selective option index when save == kSelective
  TensorRef tensor;                 // kFree, kOffload, kPrefetch

  static Op Forward(int layer, SaveMode save, int option = -1) {
    return Op{OpKind::kForward, layer, save, option, {}};
  }
  static Op Recompute(int layer, SaveMode save, int option = -1) {
    return Op{OpKind::kRecompute, layer, save, option, {}};
  }
  static Op Backward(int layer) { return Op{OpKind::kBackward, layer, SaveMode::kNone, -1, {}}; }
  static Op Free(TensorRef t) { return Op{OpKind::kFree, -1, SaveMode::kNone, -1, t}; }
  static Op OptimizerStep() { return Op{OpKind::kOptimizerStep, -1, SaveMode::kNone, -1, {}}; }
  static Op Offload(TensorRef t) { return Op{OpKind::kOffload, -1, SaveMode::kNone, -1, t}; }
  static Op Prefetch(TensorRef t) { return Op{OpKind::kPrefetch, -1, SaveMode::kNone, -1, t}; }
  // An op on one tensor: a free, an offload or a prefetch.
  bool on_tensor() const {
    return kind == OpKind::kFree || kind == OpKind::kOffload || kind == OpKind::kPrefetch;
  }
};

struct Schedule {
  int num_layers = 0;
  std::vector<Op> ops;
};

// The chain's forward/backward dependency graph, a Boost.Graph DAG: one
// vertex for the batch, one forward and one backward vertex per layer; each
// edge carries the tensor passed (x[i+1] from forward i to forward i+1 and
// to backward i+1 as its input, the loss x[L] to backward L-1; a[i] from
// forward i to backward i; g[i] from backward i to backward i-1). A layer's
// backward does not read its output: autograd starts it from the output's
// place in the graph, as torch.utils.checkpoint does, so a recompute's
// output is freed as soon as it is made. What an op reads and writes is
// read off this graph, and liveness (AddFrees) follows from it.
class ChainGraph {
 public:
  explicit ChainGraph(int num_layers);
  // The graph of an L-layer chain, built once per thread and length and kept:
  // schedules are built and simulated in solver loops.
  static const ChainGraph& For(int num_layers);
  int num_layers() const { return num_layers_; }
  // Tensors the op reads / writes. A forward without grad writes only x[i+1].
  // Frees, the optimizer step and out-of-range layers read and write nothing.
  const std::vector<TensorRef>& Reads(const Op& op) const;
  const std::vector<TensorRef>& Writes(const Op& op) const;

  // A dense index for a tensor of this chain, in [0, num_tensors()).
  int TensorIndex(TensorRef t) const {
    return static_cast<int>(t.kind) * (num_layers_ + 1) + t.index;
  }
  int num_tensors() const { return 3 * (num_layers_ + 1); }

 private:
  int num_layers_;
  std::vector<std::vector<TensorRef>> forward_reads_, forward_writes_, forward_nograd_writes_;
  std::vector<std::vector<TensorRef>> backward_reads_, backward_writes_;
  std::vector<TensorRef> none_;
};

// Liveness pass: returns `compute_ops` with a kFree inserted after the last
// read of each tensor allocation (before it is written again, or at the end).
// Tensors that are never read are freed right after they are written.
Schedule AddFrees(const std::vector<Op>& compute_ops, int num_layers);

// Checks that the schedule is executable: layers in range, every read tensor
// is live (on the device), no tensor is written while live, every layer gets
// exactly one backward, backward order allows the gradient to flow (g[i+1]
// live), selective options exist in `profile`, and offloads move only
// checkpoints (see kOffload) over a link the profile has (HostLink).
Status ValidateSchedule(const Schedule& schedule, const Profile& profile);
Status ValidateSchedule(const Schedule& schedule, const Profile& profile, const ChainGraph& graph);

// "x3", "a0", "g12" and back.
std::string TensorName(TensorRef t);
Result<TensorRef> ParseTensorName(std::string_view name);

// Offloads the checkpoints x[i] for i in `xs` (each written once in the
// forward pass by a forward without grad): a kOffload right after the first
// forward that reads x[i] after it was written, and a kPrefetch before the
// next op that reads it, issued `prefetch_lead` compute ops (forward,
// recompute, backward) earlier, so a copy over an overlapped link can hide
// behind them; 0: right before its reader. Fails for an x[i] that is not a
// checkpoint of `schedule` (the result would not validate).
Result<Schedule> InsertOffloads(const Schedule& schedule, const std::vector<int>& xs,
                                int prefetch_lead);

// InsertOffloads in two steps, for schedules that offload a prefix of the
// same checkpoints: where each x[i] of `xs` moves (its kOffload goes before
// op `out` of `schedule`, its kPrefetch before op `in`; n: at the end),
// each independent of the others, failing as InsertOffloads does; and
// `schedule` with the copies of the first `count` of them inserted, which
// is InsertOffloads of the first `count` of `xs`.
struct OffloadPlace {
  int x = 0;
  int out = 0;
  int in = 0;
};
Result<std::vector<OffloadPlace>> PlaceOffloads(const Schedule& schedule,
                                                const std::vector<int>& xs, int prefetch_lead);
Schedule WithOffloads(const Schedule& schedule, const std::vector<OffloadPlace>& places,
                      size_t count);

// Human-readable op: "forward 3 (save)", "recompute 2 (no grad)", "free a3",
// "offload x3", "prefetch x3".
std::string DescribeOp(const Op& op);

// JSON array of ops, as in plan.json's "schedule":
//   {"op":"forward","layer":0,"save":"all"}  save: "none" | "all" | "selective" (+ "option")
//   {"op":"recompute","layer":3,"save":"none"}  {"op":"backward","layer":3}
//   {"op":"free","tensor":"a3"}  {"op":"optimizer_step"}
//   {"op":"offload","tensor":"x3"}  {"op":"prefetch","tensor":"x3"}
std::string ScheduleToJson(const Schedule& schedule);
Result<Schedule> ParseScheduleJson(std::string_view json_text, int num_layers,
                                   const std::string& source);

}  // namespace remat

#endif  // REMAT_SCHEDULE_H_
