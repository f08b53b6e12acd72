// Remembered simulations of one profile: while a PlanMemo for a profile is
// open, MakePlanFromSchedule and AccountPlanMemory on that very profile
// object (the same address) take a schedule's simulation and allocator
// replay from the memo when the same schedule was simulated before, on any
// thread. The searches over strategies and budgets simulate the same
// schedules many times (a family of candidates at every budget bisected, the
// strategies optimal contains, the least-memory plans); both computations
// are deterministic functions of the profile and the schedule, so the plans
// are the same with or without the memo.
#ifndef REMAT_PLAN_PLAN_MEMO_H_
#define REMAT_PLAN_PLAN_MEMO_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "remat/device/caching_allocator.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"

namespace remat {

// Opens a memo for `profile` for the lifetime of this object; the profile
// must outlive it and must not change while it is open. Memos for the same
// profile object nest (the innermost one open is used; the outer ones are
// not touched), unless one joins: it then shares the innermost memo open
// for the profile (its results, its kept values, its stats), where there
// is one, so searches one after another on one profile (a sweep over
// budgets and strategies) simulate each schedule once. Not copyable.
class PlanMemo {
 public:
  enum class Open { kNew, kJoin };
  explicit PlanMemo(const Profile& profile, Open open = Open::kNew);
  ~PlanMemo();
  PlanMemo(const PlanMemo&) = delete;
  PlanMemo& operator=(const PlanMemo&) = delete;

  // What the memo did: results computed (and kept while there was room)
  // and results answered from it.
  struct Stats {
    int64_t simulations_run = 0;
    int64_t simulations_reused = 0;
    int64_t replays_run = 0;
    int64_t replays_reused = 0;
  };
  Stats stats() const;

  struct Store;  // the remembered results (plan_memo.cc)

 private:
  const Profile& profile_;
  std::shared_ptr<Store> store_;
};

namespace plan_memo {

// Simulate(profile, schedule, nullptr, detail), from the memo open for
// `profile` when there is one.
Result<SimulationResult> Simulated(const Profile& profile, const Schedule& schedule,
                                   SimulationDetail detail);

// ReplayTrainingSteps(profile, schedule, options, limit), from the memo open
// for `profile` when there is one.
Result<TrainingStepReplay> Replayed(const Profile& profile, const Schedule& schedule,
                                    const AllocatorOptions& options, const AllocatorLimit& limit);

// What a solver derives from `profile` (alone, or with what `name` says),
// kept under `name` while a memo is open for it: the value kept there, or null where
// none is (or no memo is open). Keep it with Keep; the first value kept
// under a name stays.
std::shared_ptr<const void> Kept(const Profile& profile, const std::string& name);
void Keep(const Profile& profile, const std::string& name, std::shared_ptr<const void> value);

}  // namespace plan_memo
}  // namespace remat

#endif  // REMAT_PLAN_PLAN_MEMO_H_
