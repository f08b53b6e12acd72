// Solve time and solver memory of the optimal DPs.
//
//   build/bin/solver_bench --benchmark_min_time=0.2
//   build/bin/solver_bench --write_profile=measured:256:/tmp/measured256.json
//     (writes that chain of the benchmark as a profile for `planner`, exits)
//
// Arguments: chain length L, budget position (percent of the way from the
// lowest reachable peak to the keep-everything peak, activation bytes), and
// memory slots M. Chains:
//   gpt:         the analytic GPT-2-small profile (remat/analytic/analytic.h) with L-4
//                identical blocks, micro-batch 8: embedding, blocks, final
//                norm, LM head, loss (what `planner` plans for a model.json);
//   measured:    gpt with every layer's times scaled by its own factor in
//                [0.9, 1.1] (testing::JitterTimes): a measured profile, whose
//                timing noise leaves no two layers alike;
//   spread:      measured with the spread a profiler on that noisy machine
//                reports on every layer (time_spread 0.25, covering any two
//                factors: 0.2 / 0.9 < 0.25), so the blocks pool into one
//                class (solver/time_classes.h);
//   spread_persistent: spread with persistent gradient buffers (the
//                gradients in static memory, as Megatron holds them): with
//                gradients created in backward, equal intervals differ in
//                the gradients after them and share no rows
//                (interval_classes.h), with buffers they do (and with
//                gradients created in backward under GradientKey::kShifted:
//                MultiLevel/spread_shifted);
//   transformer: testing::TransformerChain, block sizes jittered so that no
//                two blocks are alike (no interval classes to share);
//   random:      testing::RandomChain, every size and time random.
// MultiLevel times the DP alone (classes, bounds, fill, schedule
// reconstruction; not the final simulation), one thread. MultiLevel/*_capped
// adds what `--strategy optimal` does around it: the single-level DP first,
// whose value caps the multi-level one (timed together).
// MultiLevel/*_threads is *_capped on every hardware thread;
// MultiLevel/*_previous is *_capped with one bound per split and one cap for
// every row (DpOptions::chunk_bounds and row_caps off)
// (bench/micro/compare_solvers.py --table prints the two side by side).
// MultiLevel/spread_pooled is what `--strategy optimal` runs on a profile
// with spreads: pooling the times, then *_capped on the pooled chain (the
// single-level DP on it, its value as the cap); its counter raw_ms is its
// schedule's recompute time simulated on the chain's own times (every
// MultiLevel case reports it: the exact ones' is their optimum), for the
// cost of pooling (bench/micro/compare_solvers.py --spread). Counters: the solver's heap
// (tables, bounds, classes; MiB), the cost-table cells (millions), the
// distinct rows solved, and the share of (row, split, slot) updates the
// branch-and-bound bound skipped.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "remat/io/io.h"
#include "remat/profile/profile.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "solver/chain_terms.h"
#include "solver/interval_bounds.h"
#include "solver/multilevel_dp.h"
#include "solver/single_level_dp.h"
#include "solver/time_classes.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat::solver {
namespace {

struct Chain {
  Profile profile;
  int64_t lowest = 0;    // lowest activation peak (bytes)
  int64_t keep_all = 0;  // activation peak keeping everything
};

enum Family { kGpt, kMeasured, kSpread, kSpreadPersistent, kTransformer, kRandom };

const Chain& GetChain(Family family, int layers) {
  static std::map<std::pair<Family, int>, std::unique_ptr<Chain>> cache;
  auto& slot = cache[{family, layers}];
  if (!slot) {
    slot = std::make_unique<Chain>();
    slot->profile = family == kGpt ? testing::GptChain(layers - 4, 8)
                    : family == kMeasured || family == kSpread || family == kSpreadPersistent
                        ? testing::JitterTimes(testing::GptChain(layers - 4, 8), 0.1, 7)
                    : family == kTransformer ? testing::TransformerChain(layers - 4, 7)
                                             : testing::RandomChain(layers, 7);
    if (family == kSpread || family == kSpreadPersistent) {
      for (LayerProfile& l : slot->profile.layers) l.time_spread = 0.25;
    }
    if (family == kSpreadPersistent) {
      for (LayerProfile& l : slot->profile.layers) {
        slot->profile.static_memory.gradient_bytes += l.gradient_bytes;
        l.gradient_bytes = 0;
      }
    }
    const ChainTerms exact(slot->profile, MemoryUnits::Bytes(int64_t{1} << 50));
    slot->lowest = IntervalBounds(exact, IntervalClasses(slot->profile), false).floor(0, layers);
    slot->keep_all = KeepAllNeeds(exact)[static_cast<size_t>(layers)];
  }
  return *slot;
}

int64_t Budget(const Chain& c, int percent) {
  return c.lowest + (c.keep_all - c.lowest) * percent / 100;
}

// kPlain: the DP alone; kCapped: the single-level DP, then the multi-level
// one capped by its value; kThreads: kCapped on every hardware thread;
// kPrevious: kCapped with the coarser pruning (one bound per split,
// one cap for every row: DpOptions::chunk_bounds and row_caps off), for
// bench/micro/compare_solvers.py --table;
// kPooled: kCapped on the chain's times pooled within their spreads;
// kShifted: kPooled with rows shared across positions, read shifted by the
// gradients created in backward between them (GradientKey::kShifted).
enum Mode { kPlain, kCapped, kThreads, kPrevious, kPooled, kShifted };

void MultiLevel(benchmark::State& state, Family family, Mode mode) {
  const Chain& c = GetChain(family, static_cast<int>(state.range(0)));
  const MemoryUnits units(Budget(c, static_cast<int>(state.range(1))), state.range(2));
  DpStats stats;
  std::optional<DpSolution> sol;
  TimeClasses pooled;
  for (auto _ : state) {
    const bool pool = mode == kPooled || mode == kShifted;
    if (pool) pooled = PoolTimesBySpread(c.profile);
    const ChainTerms terms(pool ? pooled.profile : c.profile, units);
    DpOptions options;
    if (mode != kPlain) {
      SingleLevelDp single(terms);
      const std::optional<SingleLevelSolution> s = single.Solve(nullptr);
      options.cost_cap_ms = s ? s->recompute_ms : std::numeric_limits<double>::infinity();
    }
    options.chunk_bounds = options.row_caps = mode != kPrevious;
    if (mode == kThreads) options.threads = static_cast<int>(std::thread::hardware_concurrency());
    if (mode == kShifted) options.gradients = GradientKey::kShifted;
    MultiLevelDp dp(terms, options);
    sol = dp.Solve(&stats);
    benchmark::DoNotOptimize(sol);
  }
  // The schedule's recompute time on the chain's own times.
  Result<SimulationResult> raw =
      sol ? Simulate(c.profile, AddFrees(sol->ops, c.profile.num_layers()))
          : Result<SimulationResult>(Status::Invalid("no schedule"));
  state.counters["raw_ms"] = raw.ok() ? raw->recompute_ms : -1;
  if (mode == kPooled || mode == kShifted) state.counters["classes"] = pooled.classes;
  state.counters["solver_MiB"] = static_cast<double>(stats.memory_bytes) / (1 << 20);
  state.counters["cells_M"] = static_cast<double>(stats.table_cells) / 1e6;
  state.counters["rows"] = static_cast<double>(stats.rows);
  state.counters["pruned_%"] =
      stats.split_cells ? 100.0 - 100.0 * static_cast<double>(stats.split_cells_evaluated) /
                                      static_cast<double>(stats.split_cells)
                        : 0;
  state.counters["fits"] = sol.has_value();
}

void SingleLevel(benchmark::State& state, Family family) {
  const Chain& c = GetChain(family, static_cast<int>(state.range(0)));
  const ChainTerms terms(c.profile,
                         MemoryUnits(Budget(c, static_cast<int>(state.range(1))), state.range(2)));
  DpStats stats;
  for (auto _ : state) {
    SingleLevelDp dp(terms);
    auto sol = dp.Solve(&stats);
    benchmark::DoNotOptimize(sol);
  }
  state.counters["solver_MiB"] = static_cast<double>(stats.memory_bytes) / (1 << 20);
}

// The whole grid for GPT chains; chains with no two layers alike at 1024
// layers only at the middle budget and 250 or 1000 slots (O(L^3 M) without
// shared rows; at 4000 slots the tables alone would take 6 GiB).
void Args(benchmark::internal::Benchmark* b, bool distinct_blocks) {
  b->ArgNames({"L", "budget%", "slots"});
  for (int layers : {16, 64, 256, 1024}) {
    for (int percent : {10, 40, 70}) {
      for (int slots : {250, 1000, 4000}) {
        if (distinct_blocks && layers == 1024 && (slots == 4000 || percent != 40)) continue;
        b->Args({layers, percent, slots});
      }
    }
  }
  b->Unit(benchmark::kMillisecond);
}
void SharedBlocks(benchmark::internal::Benchmark* b) { Args(b, false); }
void DistinctBlocks(benchmark::internal::Benchmark* b) { Args(b, true); }

// What `planner --strategy optimal` costs end to end at the default slots:
// relaxed DP, probes and conservative DP when needed, the single-level
// comparison, and the simulations.
void Strategy(benchmark::State& state, Family family) {
  const Chain& c = GetChain(family, static_cast<int>(state.range(0)));
  PlanOptions o;
  o.strategy = remat::Strategy::kOptimal;
  o.budget_bytes = c.profile.static_bytes() + Budget(c, static_cast<int>(state.range(1)));
  bool fits = false;
  for (auto _ : state) {
    Result<PlanSet> set = MakePlan(c.profile, o);
    fits = set.ok() && set->chosen.fits;
  }
  state.counters["fits"] = fits;
}
void StrategyArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"L", "budget%"});
  for (int layers : {16, 64, 256}) {
    for (int percent : {10, 40, 70}) b->Args({layers, percent});
  }
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(MultiLevel, gpt, kGpt, kPlain)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, measured, kMeasured, kPlain)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, transformer, kTransformer, kPlain)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, random, kRandom, kPlain)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, gpt_capped, kGpt, kCapped)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, measured_capped, kMeasured, kCapped)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, transformer_capped, kTransformer, kCapped)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, spread_capped, kSpread, kCapped)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, spread_pooled, kSpread, kPooled)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, spread_shifted, kSpread, kShifted)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, spread_persistent_capped, kSpreadPersistent, kCapped)
    ->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, spread_persistent_pooled, kSpreadPersistent, kPooled)
    ->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, gpt_previous, kGpt, kPrevious)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, measured_previous, kMeasured, kPrevious)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(MultiLevel, gpt_threads, kGpt, kThreads)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(MultiLevel, measured_threads, kMeasured, kThreads)->Apply(DistinctBlocks);
BENCHMARK_CAPTURE(SingleLevel, gpt, kGpt)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(SingleLevel, transformer, kTransformer)->Apply(SharedBlocks);
BENCHMARK_CAPTURE(Strategy, gpt, kGpt)->Apply(StrategyArgs);
BENCHMARK_CAPTURE(Strategy, measured, kMeasured)->Apply(StrategyArgs);
BENCHMARK_CAPTURE(Strategy, spread, kSpread)->Apply(StrategyArgs);
BENCHMARK_CAPTURE(Strategy, spread_persistent, kSpreadPersistent)->Apply(StrategyArgs);
BENCHMARK_CAPTURE(Strategy, transformer, kTransformer)->Apply(StrategyArgs);

// "--write_profile=FAMILY:LAYERS:PATH": writes the benchmark's chain as a
// profile JSON. Returns false if the argument is not that.
bool WriteProfile(const std::string& arg) {
  const std::string flag = "--write_profile=";
  if (arg.rfind(flag, 0) != 0) return false;
  const std::string spec = arg.substr(flag.size());
  const size_t a = spec.find(':'), b = spec.find(':', a + 1);
  if (a == std::string::npos || b == std::string::npos) {
    std::fprintf(stderr,
                 "--write_profile=FAMILY:LAYERS:PATH (gpt, measured, spread, spread_persistent, "
                 "transformer, random)\n");
    std::exit(2);
  }
  const std::string name = spec.substr(0, a), path = spec.substr(b + 1);
  const int layers = std::atoi(spec.substr(a + 1, b - a - 1).c_str());
  const std::map<std::string, Family> families = {{"gpt", kGpt},
                                                  {"measured", kMeasured},
                                                  {"spread", kSpread},
                                                  {"spread_persistent", kSpreadPersistent},
                                                  {"transformer", kTransformer},
                                                  {"random", kRandom}};
  if (!families.count(name) || layers < 5) {
    std::fprintf(stderr, "unknown family or fewer than 5 layers: %s\n", spec.c_str());
    std::exit(2);
  }
  const Chain& c = GetChain(families.at(name), layers);
  const Status written = WriteOutputFile(path, ProfileToJson(c.profile));
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", written.message().c_str());
    std::exit(2);
  }
  std::printf(
      "%s: %d layers; activation peaks: lowest %lld, keeping everything %lld bytes; "
      "static %lld bytes\n",
      path.c_str(), layers, static_cast<long long>(c.lowest), static_cast<long long>(c.keep_all),
      static_cast<long long>(c.profile.static_bytes()));
  return true;
}

}  // namespace
}  // namespace remat::solver

int main(int argc, char** argv) {
  if (argc == 2 && remat::solver::WriteProfile(argv[1])) return 0;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
