// Plans: a schedule with its simulated prediction, the strategy that made it
// and its setting. The strategies that make plans are in strategies.h; the
// whole planning question (a job, fit suggestions, a sweep) in planning.h.
#ifndef REMAT_PLAN_H_
#define REMAT_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/schedule/decisions.h"
#include "remat/device/device_memory.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"
#include "remat/io/status.h"

namespace remat {

enum class Strategy {
  kAuto,           // cheapest fitting plan among all strategies
  kNone,           // keep everything
  kUniform,        // checkpoint every k-th block boundary, segments recomputed
  kSegment,        // n equal segments of blocks, only segment inputs kept
  kSelective,      // recompute the attention core of chosen blocks (Megatron)
  kManual,         // exactly the listed blocks checkpointed
  kOptimal,        // multi-level optimal schedule (solver)
  kOptimalSingle,  // optimal set of checkpointed layers, each recomputed once
  kOffload,        // checkpoints offloaded to host memory (needs a host link)
};
const char* ToString(Strategy s);
// Accepts the names ToString prints. Lists the accepted names on error.
Result<Strategy> ParseStrategy(std::string_view text);

struct PlanOptions {
  int64_t budget_bytes = 0;  // total device memory allowed; 0 = no budget
  Strategy strategy = Strategy::kAuto;
  int every = 0;                       // uniform: k; 0 = choose (budget) or round(sqrt(N))
  int segments = 0;                    // segment: n; 0 = choose (budget) or round(sqrt(N))
  std::vector<int> checkpoint_layers;  // manual: block indices to checkpoint
  std::vector<int> selective_layers;   // selective: block indices; empty = choose
  int slots = 0;                       // optimal: memory slots; 0 = solver default
  // optimal: solve on the profile's own times even where layers agree
  // within their measured time_spread (solver/time_classes.h); false: such
  // layers are pooled into one class for the multi-level DP.
  bool exact_times = false;
  // The device's memory besides tensors: with any term, solvers plan against
  // TensorBudget(budget_bytes) and a plan fits when its device total does.
  DeviceMemoryTerms device_memory;
};

struct Plan {
  Strategy strategy = Strategy::kNone;
  // The strategy's setting as users read it: "every 4", "3 segments",
  // "9/12 blocks", "9 selective"; empty for none. Every report shows it.
  std::string parameter;
  int64_t budget_bytes = 0;
  bool fits = true;                      // memory.total_bytes <= budget (or no budget)
  std::vector<LayerDecision> decisions;  // one per chain layer
  std::vector<int> selective_option;     // per layer: option index or -1
  Schedule schedule;
  SimulationResult predicted;
  // The device memory terms of `predicted` (without terms: every peak is
  // predicted.peak_bytes and the extra terms are 0).
  DeviceMemoryUse memory;
  DeviceMemoryTerms terms;  // what `memory` was accounted with
};

struct PlanSet {
  Plan chosen;                   // the plan to use
  bool auto_selected = false;    // chosen by kAuto among `candidates`
  Plan baseline;                 // kNone: the memory needed without checkpointing
  std::vector<Plan> candidates;  // the best plan of each strategy tried
};

// Simulates `schedule` and fills a Plan (decisions summarized from the
// schedule; `detail`: what the simulation records beyond its totals).
Result<Plan> MakePlanFromSchedule(const Profile& profile, Strategy strategy, std::string parameter,
                                  Schedule schedule, int64_t budget_bytes,
                                  SimulationDetail detail = SimulationDetail::kFull);

// The caching allocator replayed over training steps of a schedule.
struct TrainingStepReplay {
  int64_t reserved_peak_bytes = 0;   // torch.cuda.max_memory_reserved over the steps
  int64_t allocated_peak_bytes = 0;  // max_memory_allocated: the blocks, as rounded
  AllocatorReplaySummary summary;
  int oom_micro_step = -1;  // the micro-step that ran out of memory (-1: none)
  int64_t oom_event = -1;   // its event (AllocationEvents) that failed
  // AllocatorStats::driver_refusals: 0 where every event ran as it runs
  // without AllocatorLimit::driver_bytes (the limit is read nowhere else).
  int64_t driver_refusals = 0;
};

// What a replay did, event by event, for a trace file (docs/device-memory.md).
struct ReplayTrace {
  std::vector<AllocEvent> events;                 // as replayed: the model state allocated once
  std::vector<int64_t> reserved_timeline_bytes;   // reserved after each event
  std::vector<int64_t> allocated_timeline_bytes;  // allocated after each event
  std::vector<AllocatorSegmentView> segments;     // at the end, in address order
};

// At most this many micro-steps are replayed (docs/device-memory.md).
inline constexpr int kMaxReplayMicroSteps = 8;

// Replays the allocation events (AllocationEvents) of successive micro-steps
// of `schedule` on `profile` (an update's first micro-batch, then 2..K with
// the gradients, profile.grad_accumulation), the model state allocated once
// and kept, through one CudaAllocatorModel with `options` under `limit`.
// Stops when the reserved state repeats (summary.steady: a micro-step of each
// kind made no device allocation or release, so every later one repeats it),
// at an out of memory, or after `max_micro_steps`. `trace` (may be null)
// receives the events replayed and the allocator's state after each. Fails
// as Simulate does.
Result<TrainingStepReplay> ReplayTrainingSteps(const Profile& profile, const Schedule& schedule,
                                               const AllocatorOptions& options,
                                               const AllocatorLimit& limit = {},
                                               int max_micro_steps = kMaxReplayMicroSteps,
                                               ReplayTrace* trace = nullptr);

// Accounts `plan`'s device memory with `terms` against `budget_bytes` (its
// budget from then on): sets memory, terms, budget_bytes and fits. With a
// caching allocator the reserved peak is replayed (ReplayTrainingSteps): when
// the unlimited replay's device peak passes the budget, the replay is run
// again capped at the budget less the fixed terms, where PyTorch frees its
// cache and retries; the plan fits if that replay does not run out. With the
// user's fragmentation fraction instead, `plan` is re-simulated with the
// rounding tally (predicted's reserved figures) and the fraction added.
Status AccountPlanMemory(const Profile& profile, const DeviceMemoryTerms& terms,
                         int64_t budget_bytes, Plan* plan);

// True if `a` is preferable to `b` under a budget: fitting beats not fitting;
// among fitting plans the lower step time wins (then the lower device total,
// where the times are the same: SameStepTime); among non-fitting plans the
// lower device total wins (then the lower step time).
bool BetterPlan(const Plan& a, const Plan& b);

// Whether BetterPlan takes step times `a_ms` and `b_ms` as the same: within
// a billionth of the larger, or of 1 ms where both are below 1 ms.
bool SameStepTime(double a_ms, double b_ms);

}  // namespace remat

#endif  // REMAT_PLAN_H_
