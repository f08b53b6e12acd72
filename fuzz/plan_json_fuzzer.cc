// plan.json: ParsePlanJson (the input of `planner train --plan`). A plan that
// reads back must simulate: ParsePlanJson validates its schedule.
#include "fuzz_check.h"
#include "remat/plan/plan_file.h"
#include "remat/simulate/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  const std::string source = "plan.json";
  Result<LoadedPlan> plan = ParsePlanJson(fuzz::AsText(data, size), source);
  if (!plan.ok()) {
    fuzz::CheckRejection(plan.status(), source);
    return 0;
  }
  Result<SimulationResult> r = Simulate(plan->profile, plan->schedule);
  REMAT_FUZZ_CHECK(r.ok(), r.status().message());
  REMAT_FUZZ_CHECK(r->peak_bytes >= plan->profile.static_bytes(), "peak below the model state");
  REMAT_FUZZ_CHECK(r->step_ms >= 0, "negative step time");
  return 0;
}
