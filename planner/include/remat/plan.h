// Planning: from a profile and a memory budget to a plan (a schedule and its
// simulated prediction).
//
// Each strategy is a StrategySolver. With a budget, a solver returns its
// cheapest plan that fits (or, when none of its plans fits, the one with the
// lowest peak, with fits == false). MakePlan runs the requested strategy, or
// for kAuto every registered solver, and picks the cheapest fitting plan.
#ifndef REMAT_PLAN_H_
#define REMAT_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/profile.h"
#include "remat/schedule.h"
#include "remat/simulator.h"
#include "remat/status.h"

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
};
const char* ToString(Strategy s);
// Accepts the names ToString prints. Lists the accepted names on error.
Result<Strategy> ParseStrategy(std::string_view text);

// What happens to a layer's activations, as a summary of the schedule.
enum class LayerDecision {
  kKeep,        // forward with grad, everything kept until backward
  kCheckpoint,  // only its input kept; recomputed before its backward
  kRecompute,   // nothing kept; recomputed from an earlier checkpoint
  kSelective,   // forward with grad under a selective option
};
const char* ToString(LayerDecision d);

struct PlanOptions {
  int64_t budget_bytes = 0;          // total device memory allowed; 0 = no budget
  Strategy strategy = Strategy::kAuto;
  int every = 0;                     // uniform: k; 0 = choose (budget) or round(sqrt(N))
  int segments = 0;                  // segment: n; 0 = choose (budget) or round(sqrt(N))
  std::vector<int> checkpoint_layers;  // manual: block indices to checkpoint
  std::vector<int> selective_layers;   // selective: block indices; empty = choose
  int slots = 0;                     // optimal: memory slots; 0 = solver default
};

struct Plan {
  Strategy strategy = Strategy::kNone;
  std::string parameter;             // "k=4", "4 segments", "12/32 blocks", ...
  int64_t budget_bytes = 0;
  bool fits = true;                  // predicted.peak_bytes <= budget (or no budget)
  std::vector<LayerDecision> decisions;  // one per chain layer
  std::vector<int> selective_option;     // per layer: option index or -1
  Schedule schedule;
  SimulationResult predicted;
};

class StrategySolver {
 public:
  virtual ~StrategySolver() = default;
  virtual Strategy strategy() const = 0;
  virtual Result<Plan> Solve(const Profile& profile, const PlanOptions& options) const = 0;
};

// The registered solvers, one per strategy except kAuto.
const std::vector<const StrategySolver*>& AllSolvers();
const StrategySolver* FindSolver(Strategy strategy);

struct PlanSet {
  Plan chosen;                 // the plan to use
  bool auto_selected = false;  // chosen by kAuto among `candidates`
  Plan baseline;               // kNone: the memory needed without checkpointing
  std::vector<Plan> candidates;  // the best plan of each strategy tried
};

// Plans `profile` under `options`. A plan that does not fit is still
// returned (chosen.fits == false); errors are for invalid options only.
Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options);

// Builds the single-level schedule for per-layer decisions: a kCheckpoint
// layer starts a segment that runs without grad and keeps only its input;
// following kRecompute layers extend the segment. In backward each segment is
// recomputed with grad right before its layers' backwards.
// `selective_option[i]` is used for kSelective layers (may be empty: option 0).
Result<Schedule> BuildSingleLevelSchedule(const Profile& profile,
                                          const std::vector<LayerDecision>& decisions,
                                          const std::vector<int>& selective_option);

// Simulates `schedule` and fills a Plan (decisions summarized from the schedule).
Result<Plan> MakePlanFromSchedule(const Profile& profile, Strategy strategy,
                                  std::string parameter, Schedule schedule,
                                  int64_t budget_bytes);

// Per-layer decisions read back from a schedule's first forward pass.
void SummarizeDecisions(const Schedule& schedule, std::vector<LayerDecision>* decisions,
                        std::vector<int>* selective_option);

// True if `a` is preferable to `b` under a budget: fitting beats not fitting;
// among fitting plans the lower step time wins (then the lower peak); among
// non-fitting plans the lower peak wins.
bool BetterPlan(const Plan& a, const Plan& b);

}  // namespace remat

#endif  // REMAT_PLAN_H_
