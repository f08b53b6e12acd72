// How fast the simulator replays a schedule and the heuristics search their
// parameter, on transformer-shaped chains of 16..1024 layers.
//   build/bin/simulator_bench
#include <benchmark/benchmark.h>

#include "remat/strategies/strategies.h"
#include "testing/chains.h"

namespace remat {
namespace {

void BM_Simulate(benchmark::State& state) {
  const Profile p = testing::TransformerChain(static_cast<int>(state.range(0)));
  std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
  for (int i = 1; i < p.num_layers() - 3; ++i) {
    d[i] = (i % 4 == 1) ? LayerDecision::kCheckpoint : LayerDecision::kRecompute;
  }
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  for (auto _ : state) benchmark::DoNotOptimize(Simulate(p, s));
  state.counters["ops"] = static_cast<double>(s.ops.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.ops.size()));
}
BENCHMARK(BM_Simulate)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// Auto over the heuristics (uniform, segment and selective each try every
// setting) at a budget halfway between their extremes.
void BM_AutoHeuristics(benchmark::State& state) {
  const Profile p = testing::TransformerChain(static_cast<int>(state.range(0)));
  PlanOptions none;
  none.strategy = Strategy::kNone;
  PlanOptions o;
  o.budget_bytes = MakePlan(p, none)->chosen.predicted.peak_bytes / 2;
  for (auto _ : state) benchmark::DoNotOptimize(MakePlan(p, o));
}
BENCHMARK(BM_AutoHeuristics)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace remat
