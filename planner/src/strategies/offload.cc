// The offload strategy: checkpoints moved to host memory over the profile's
// link (HostLink) instead of staying on the device. Its layer lists are the
// uniform strategy's (a checkpoint every k blocks), with the first j of their
// offloadable checkpoints offloaded: the earliest ones stay on the host the
// longest, so they free the most device memory per byte of host memory.
// Without a budget: every block checkpointed and every checkpoint offloaded,
// the lowest device peak offload reaches (as far as the host budget allows).
// With one: the fastest (k, j) that fits, every candidate simulated (its
// totals; the one kept again in full).
#include "remat/io/units.h"
#include "remat/plan/plan_memo.h"
#include "remat/schedule/decisions.h"
#include "strategies/solvers.h"

namespace remat::strategies {
namespace {

// The layers of `d` whose checkpoint x[i] can move (kCheckpoint with a
// layer before it that runs without grad), in chain order.
std::vector<int> Offloadable(const std::vector<LayerDecision>& d) {
  std::vector<int> out;
  for (size_t i = 1; i < d.size(); ++i) {
    if (d[i] == LayerDecision::kCheckpoint && RunsWithoutGrad(d[i - 1])) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

class OffloadSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kOffload; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    if (!p.host_link.present()) {
      return Status::Invalid(
          "offload: the profile has no host link; give --host-link pcie4|pcie5|nvlink-c2c|cpu|"
          "<N>GB/s");
    }
    const std::vector<int> blocks = BlockLayers(p);
    const int n = static_cast<int>(blocks.size());
    if (o.every < 0 || o.every > n) {
      return Status::Invalid("offload: every " + std::to_string(o.every) + " blocks: expected 1.." +
                             std::to_string(n) + " (the model has " + std::to_string(n) +
                             " blocks)");
    }
    const int64_t host_budget = p.host_link.budget_bytes;
    Plan best;
    bool have = false;
    auto try_every = [&](int k, bool all_only) -> Status {
      std::vector<char> start(n);
      for (int b = 0; b < n; ++b) start[b] = b % k == 0;
      std::vector<LayerDecision> d = SegmentDecisions(p.num_layers(), blocks, start);
      const std::vector<int> movable = Offloadable(d);
      // The most checkpoints the host budget holds (all resident at once
      // at the start of backward).
      int most = 0;
      for (int64_t host = 0; most < static_cast<int>(movable.size()); ++most) {
        host += p.layers[movable[most] - 1].output_bytes;
        if (host_budget > 0 && host > host_budget) break;
      }
      // The layer list's schedule, built once: offloading its first j
      // movable checkpoints is BuildSingleLevelSchedule's InsertOffloads
      // of them (kOffload decisions on those layers).
      const int first = all_only ? most : 1;
      if (first > most) return Status::Ok();
      REMAT_ASSIGN_OR_RETURN(const Schedule kept, BuildSingleLevelSchedule(p, d, {}));
      for (int j = first; j <= most; ++j) {
        Schedule schedule;
        if (j == 0) {
          schedule = kept;
        } else {
          REMAT_ASSIGN_OR_RETURN(
              schedule, InsertOffloads(kept, std::vector<int>(movable.begin(), movable.begin() + j),
                                       kOffloadPrefetchLead));
        }
        REMAT_ASSIGN_OR_RETURN(
            Plan plan, MakePlanFromSchedule(
                           p, strategy(),
                           "every " + std::to_string(k) + ", " + std::to_string(j) + " offloaded",
                           std::move(schedule), o.budget_bytes, SimulationDetail::kTotals));
        KeepBetter(std::move(plan), &best, &have);
      }
      return Status::Ok();
    };
    if (o.every > 0 || o.budget_bytes <= 0) {
      REMAT_RETURN_IF_ERROR(try_every(o.every > 0 ? o.every : 1, o.budget_bytes <= 0));
    } else {
      for (int k = 1; k <= n; ++k) REMAT_RETURN_IF_ERROR(try_every(k, false));
    }
    if (!have) {
      return Status::Invalid("offload: no checkpoint can move (the host budget of " +
                             FormatBytes(host_budget) + " holds none)");
    }
    // The candidates were simulated for their totals (the same in full);
    // the one kept, with its timeline.
    REMAT_ASSIGN_OR_RETURN(best.predicted,
                           plan_memo::Simulated(p, best.schedule, SimulationDetail::kFull));
    return best;
  }
};

}  // namespace

const StrategySolver* OffloadStrategySolver() {
  static const OffloadSolver solver;
  return &solver;
}

}  // namespace remat::strategies
