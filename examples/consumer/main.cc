// Plans a model with the installed remat planner library and prints the
// chosen plan: its strategy, its setting and its predicted peak.
//
//   remat_consumer <model.json | config.json | profile.json> [budget, e.g. 24GB]
//
// Exit codes as the planner's: 0 the plan fits, 2 bad input, 3 nothing fits.
#include <cstdio>
#include <string>

#include "remat/planning/planning.h"
#include "remat/io/units.h"

namespace {

int Fail(const remat::Status& status) {
  std::fprintf(stderr, "remat_consumer: %s\n", status.message().c_str());
  return status.code() == remat::StatusCode::kInvalidInput ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: remat_consumer <model.json> [budget, e.g. 24GB]\n");
    return 2;
  }
  remat::Result<remat::Job> job = remat::LoadJob(argv[1], remat::JobOverrides{});
  if (!job.ok()) return Fail(job.status());

  remat::PlanningRequest request;  // strategy auto: the fastest plan that fits
  if (argc == 3) {
    remat::Result<int64_t> budget = remat::ParseBytes(argv[2]);
    if (!budget.ok()) return Fail(budget.status().WithPrefix("budget"));
    request.options.budget_bytes = *budget;
  }
  request.suggest_fit = false;
  remat::Result<remat::PlanningResult> result = remat::RunPlanner(*job, request);
  if (!result.ok()) return Fail(result.status());

  const remat::Plan& plan = result->plans.chosen;
  std::printf("strategy: %s\n", remat::ToString(plan.strategy));
  std::printf("setting: %s\n", plan.parameter.empty() ? "-" : plan.parameter.c_str());
  std::printf("predicted peak: %s (%lld bytes)\n",
              remat::FormatBytes(plan.memory.total_bytes).c_str(),
              static_cast<long long>(plan.memory.total_bytes));
  std::printf("fits: %s\n", plan.fits ? "yes" : "no");
  return plan.fits ? 0 : 3;
}
