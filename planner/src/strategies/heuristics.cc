// The strategies users get from HF, DeepSpeed and Megatron today: none,
// uniform every-k, equal segments, selective attention recompute, and a
// manual layer list. With a budget each picks its parameter to fit at the
// lowest simulated step time.
#include <algorithm>
#include <set>

#include "strategies/heuristic_search.h"
#include "strategies/solvers.h"

namespace remat::strategies {
namespace {

// The simulated plan of `family`'s candidate `parameter`.
Result<Plan> Evaluate(const Profile& p, const HeuristicFamily& family, int parameter,
                      int64_t budget_bytes) {
  HeuristicCandidate c = family.Candidate(parameter);
  return EvaluateDecisions(p, family.strategy(), std::move(c.parameter), c.decisions,
                           c.selective_option, budget_bytes);
}

class NoneSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kNone; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    return EvaluateDecisions(p, Strategy::kNone, "", std::vector<LayerDecision>(p.num_layers()), {},
                             o.budget_bytes);
  }
};

// Checkpoint every k-th block boundary: segments of k blocks, each recomputed.
class UniformSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kUniform; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    const std::vector<int> blocks = BlockLayers(p);
    const int n = static_cast<int>(blocks.size());
    if (o.every < 0 || o.every > n) {
      return Status::Invalid("uniform: every " + std::to_string(o.every) + " blocks: expected 1.." +
                             std::to_string(n) + " (the model has " + std::to_string(n) +
                             " blocks)");
    }
    const HeuristicFamily family(p, Strategy::kUniform);
    auto plan_for = [&](int k) { return Evaluate(p, family, k, o.budget_bytes); };
    if (o.every > 0 || o.budget_bytes <= 0) return plan_for(o.every > 0 ? o.every : RoundSqrt(n));
    REMAT_ASSIGN_OR_RETURN(std::optional<Plan> best, SearchFamily(p, family, o.budget_bytes));
    return best ? *std::move(best) : Plan{};
  }
};

// n segments of equal length (the first N mod n one block longer), only
// segment inputs kept: torch.utils.checkpoint_sequential / DeepSpeed.
class SegmentSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kSegment; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    const std::vector<int> blocks = BlockLayers(p);
    const int n = static_cast<int>(blocks.size());
    if (o.segments < 0 || o.segments > n) {
      return Status::Invalid("segment: " + std::to_string(o.segments) + " segments: expected 1.." +
                             std::to_string(n) + " (the model has " + std::to_string(n) +
                             " blocks)");
    }
    const HeuristicFamily family(p, Strategy::kSegment);
    auto plan_for = [&](int segs) { return Evaluate(p, family, segs, o.budget_bytes); };
    if (o.segments > 0 || o.budget_bytes <= 0) {
      return plan_for(o.segments > 0 ? o.segments : RoundSqrt(n));
    }
    REMAT_ASSIGN_OR_RETURN(std::optional<Plan> best, SearchFamily(p, family, o.budget_bytes));
    return best ? *std::move(best) : Plan{};
  }
};

// Megatron-style selective recompute: chosen blocks run their selective
// option 0 (the attention core). With a budget, blocks are added in order of
// bytes saved per millisecond of extra recompute until the plan fits.
class SelectiveSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kSelective; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    std::vector<int> listed_layers;
    if (!o.selective_layers.empty()) {
      const std::vector<std::vector<int>> passes = BlockLayersPerPass(p);
      const std::vector<int>& listed = passes.front();
      for (int b : o.selective_layers) {
        if (b < 0 || b >= static_cast<int>(listed.size())) {
          return Status::Invalid("selective block " + std::to_string(b) + " out of range 0.." +
                                 std::to_string(listed.size() - 1));
        }
        if (p.layers[listed[b]].selective.empty()) {
          return Status::Invalid("block " + std::to_string(b) + " ('" + p.layers[listed[b]].name +
                                 "') has no selective option");
        }
        for (const std::vector<int>& pass : passes) listed_layers.push_back(pass[b]);
      }
    }
    const HeuristicFamily family(p, Strategy::kSelective, std::move(listed_layers));
    const int total = family.last_parameter();
    auto plan_for = [&](int m) { return Evaluate(p, family, m, o.budget_bytes); };
    if (!o.selective_layers.empty() || o.budget_bytes <= 0) return plan_for(total);
    REMAT_ASSIGN_OR_RETURN(std::optional<Plan> best, SearchFamily(p, family, o.budget_bytes));
    return best ? *std::move(best) : Plan{};
  }
};

// Exactly the listed blocks are checkpointed (each its own segment), as with
// a torch.utils.checkpoint / HF / Megatron layer list.
class ManualSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kManual; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    // Block numbers count one pass's blocks and apply to every pass.
    const std::vector<std::vector<int>> passes = BlockLayersPerPass(p);
    const int n = static_cast<int>(passes.front().size());
    std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
    std::set<int> seen;
    std::string listed;
    for (int b : o.checkpoint_layers) {
      if (b < 0 || b >= n) {
        return Status::Invalid("manual: checkpoint block " + std::to_string(b) +
                               " is out of range, the model has " + std::to_string(n) +
                               " blocks (0-" + std::to_string(n - 1) + ")");
      }
      if (!seen.insert(b).second) {
        return Status::Invalid("manual: checkpoint block " + std::to_string(b) +
                               " is listed twice");
      }
      for (const std::vector<int>& pass : passes) d[pass[b]] = LayerDecision::kCheckpoint;
      listed += (listed.empty() ? "" : ",") + std::to_string(b);
    }
    return EvaluateDecisions(p, Strategy::kManual, "blocks " + (listed.empty() ? "(none)" : listed),
                             d, {}, o.budget_bytes);
  }
};

}  // namespace

const std::vector<const StrategySolver*>& RegisteredSolvers() {
  static const NoneSolver none;
  static const UniformSolver uniform;
  static const SegmentSolver segment;
  static const SelectiveSolver selective;
  static const ManualSolver manual;
  static const std::vector<const StrategySolver*> solvers = {&none,
                                                             &uniform,
                                                             &segment,
                                                             &selective,
                                                             &manual,
                                                             OptimalSingleStrategySolver(),
                                                             OptimalStrategySolver(),
                                                             OffloadStrategySolver()};
  return solvers;
}

}  // namespace remat::strategies
