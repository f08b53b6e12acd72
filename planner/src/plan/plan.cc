// Plans: strategy names, a plan from a schedule (simulated), plan ranking.
#include "remat/plan/plan.h"

#include <cmath>
#include <optional>
#include <set>

#include "io/json_fields.h"
#include "plan/known_tensors.h"
#include "remat/plan/plan_memo.h"

namespace remat {

using internal::JoinAlternatives;
using plan_internal::KnowsItsTensors;
namespace {

const std::vector<std::string> kStrategyNames = {"auto",    "none",           "uniform",
                                                 "segment", "selective",      "manual",
                                                 "optimal", "optimal-single", "offload"};

// The device total within `budget_bytes` (or no budget) and the offloaded
// bytes within the host link's budget (or no limit).
bool Fits(const Profile& profile, const Plan& plan, int64_t budget_bytes) {
  const int64_t host = profile.host_link.budget_bytes;
  const bool oom = plan.memory.replay.has_value() && plan.memory.replay->out_of_memory;
  return !oom && (budget_bytes <= 0 || plan.memory.total_bytes <= budget_bytes) &&
         (host <= 0 || plan.predicted.host_peak_bytes <= host);
}

// The device memory of `plan` with its reserved peak replayed (the
// contract of AccountPlanMemory), with kTensorReplayMargin where the
// profile knows its tensors.
Result<DeviceMemoryUse> ReplayDeviceMemory(const Profile& profile, const Plan& plan,
                                           const DeviceMemoryTerms& terms, int64_t budget_bytes) {
  const AllocatorOptions& conf = terms.alloc_conf;
  AllocatorLimit limit;
  if (conf.per_process_memory_fraction < 1.0 && budget_bytes > 0) {
    limit.fraction_cap_bytes =
        MemoryFractionCapBytes(conf.per_process_memory_fraction, budget_bytes);
  }
  const int64_t allocated = plan.predicted.peak_bytes;
  const double margin = KnowsItsTensors(profile) ? kTensorReplayMargin : 0;
  // What the reserved peak may reach with its margin beside it.
  const int64_t room = static_cast<int64_t>(
      std::floor(static_cast<double>(budget_bytes - terms.fixed_bytes()) / (1 + margin)));
  // The replay at the card's limit (below), where it may be needed.
  const bool may_cap = budget_bytes > 0 && allocated <= room && room > 0;
  AllocatorLimit at_card = limit;
  at_card.driver_bytes = room;
  std::optional<TrainingStepReplay> replayed;
  if (may_cap) {
    // Replayed at the card's limit first. Where the driver refused nothing,
    // every event ran as without the limit: that is the replay without it,
    // its reserved peak within `room`. Where it refused a segment, the
    // replay without the limit takes that segment, so passes `room`, and
    // without a fraction cap it cannot run out of memory: the capped replay
    // is the answer below, unless it ran out itself.
    REMAT_ASSIGN_OR_RETURN(TrainingStepReplay capped,
                           plan_memo::Replayed(profile, plan.schedule, conf, at_card));
    if (capped.driver_refusals == 0) {
      replayed = std::move(capped);
    } else if (limit.fraction_cap_bytes == 0 && !capped.summary.out_of_memory) {
      capped.summary.under_budget_limit = true;
      return AccountReplayedDeviceMemory(allocated, capped.reserved_peak_bytes, capped.summary,
                                         terms, margin);
    }
  }
  if (!replayed) {
    REMAT_ASSIGN_OR_RETURN(replayed, plan_memo::Replayed(profile, plan.schedule, conf, limit));
  }
  TrainingStepReplay& replay = *replayed;
  const bool over = budget_bytes > 0 && replay.reserved_peak_bytes > room;
  // Past the budget the allocator frees its cache and retries before it
  // fails: replay again at the card's limit, unless the tensors alone pass it.
  if (over && !replay.summary.out_of_memory && may_cap) {
    REMAT_ASSIGN_OR_RETURN(TrainingStepReplay capped,
                           plan_memo::Replayed(profile, plan.schedule, conf, at_card));
    if (!capped.summary.out_of_memory) {
      capped.summary.under_budget_limit = true;
      return AccountReplayedDeviceMemory(allocated, capped.reserved_peak_bytes, capped.summary,
                                         terms, margin);
    }
  }
  if (over) replay.summary.out_of_memory = true;
  return AccountReplayedDeviceMemory(allocated, replay.reserved_peak_bytes, replay.summary, terms,
                                     margin);
}

}  // namespace

const char* ToString(Strategy s) { return kStrategyNames[static_cast<int>(s)].c_str(); }

Result<Strategy> ParseStrategy(std::string_view text) {
  for (size_t i = 0; i < kStrategyNames.size(); ++i) {
    if (kStrategyNames[i] == text) return static_cast<Strategy>(i);
  }
  return Status::Invalid("unknown strategy '" + std::string(text) + "', expected " +
                         JoinAlternatives(kStrategyNames));
}

Result<Plan> MakePlanFromSchedule(const Profile& profile, Strategy strategy, std::string parameter,
                                  Schedule schedule, int64_t budget_bytes,
                                  SimulationDetail detail) {
  Plan plan;
  plan.strategy = strategy;
  plan.parameter = std::move(parameter);
  plan.budget_bytes = budget_bytes;
  REMAT_ASSIGN_OR_RETURN(plan.predicted, plan_memo::Simulated(profile, schedule, detail));
  plan.memory = AccountDeviceMemory(plan.predicted.peak_bytes, plan.predicted.reserved_peak_bytes,
                                    plan.terms);
  plan.fits = Fits(profile, plan, budget_bytes);
  SummarizeDecisions(schedule, &plan.decisions, &plan.selective_option);
  plan.schedule = std::move(schedule);
  return plan;
}

Status AccountPlanMemory(const Profile& profile, const DeviceMemoryTerms& terms,
                         int64_t budget_bytes, Plan* plan) {
  if (terms.replays_allocator()) {
    REMAT_ASSIGN_OR_RETURN(const DeviceMemoryUse use,
                           ReplayDeviceMemory(profile, *plan, terms, budget_bytes));
    plan->terms = terms;
    plan->memory = use;
    plan->budget_bytes = budget_bytes;
    plan->fits = Fits(profile, *plan, budget_bytes);
    return Status::Ok();
  }
  if (terms.caching_allocator) {
    REMAT_ASSIGN_OR_RETURN(plan->predicted, Simulate(profile, plan->schedule, &terms.allocator));
  }
  plan->terms = terms;
  plan->memory =
      AccountDeviceMemory(plan->predicted.peak_bytes, plan->predicted.reserved_peak_bytes, terms);
  plan->budget_bytes = budget_bytes;
  plan->fits = Fits(profile, *plan, budget_bytes);
  return Status::Ok();
}

bool SameStepTime(double a_ms, double b_ms) {
  return std::fabs(a_ms - b_ms) <= 1e-9 * std::max(1.0, std::max(a_ms, b_ms));
}

bool BetterPlan(const Plan& a, const Plan& b) {
  if (a.fits != b.fits) return a.fits;
  const double ta = a.predicted.step_ms, tb = b.predicted.step_ms;
  const bool same_time = SameStepTime(ta, tb);
  const int64_t pa = a.memory.total_bytes, pb = b.memory.total_bytes;
  if (a.fits) return same_time ? pa < pb : ta < tb;
  return pa != pb ? pa < pb : ta < tb;
}

}  // namespace remat
