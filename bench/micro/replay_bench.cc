// How fast the caching allocator is replayed over a plan's training steps
// (ReplayTrainingSteps, remat/plan/plan.h) and how fast a micro-step's
// allocation events are made (AllocationEvents), on the rank of Llama 3.1
// 405B's config.json under FSDP2 over 16 ranks x tensor and sequence
// parallel 8 (128 GPUs), 2 x 8,192 tokens, mixed bf16, h100: the plans of
// every strategy auto weighs at 80 GB, one replay per iteration in turn.
// Arg 0: PyTorch's default allocator settings; 1: expandable_segments.
//   build/bin/replay_bench
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/planning/job.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

struct Case {
  Profile profile;
  std::vector<Schedule> schedules;
};

const Case& Llama405b() {
  static const Case c = [] {
    JobOverrides o;
    o.micro_batch = 2;
    o.seq_len = 8192;
    o.precision = Precision::kMixedBf16;
    o.device = "h100";
    Parallelism p;
    p.gpus = 128;
    p.data = DataParallel::kFsdp2;
    p.tensor = 8;
    p.sequence = true;
    o.parallel = p;
    Result<Job> job = LoadJob(REMAT_SOURCE_DIR "/examples/hf/llama-3.1-405b.config.json", o);
    if (!job.ok()) {
      std::fprintf(stderr, "replay_bench: %s\n", job.status().message().c_str());
      std::exit(1);
    }
    PlanOptions options;
    options.budget_bytes = int64_t{80} << 30;
    Result<PlanSet> plans = MakePlan(job->profile, options);
    if (!plans.ok()) {
      std::fprintf(stderr, "replay_bench: %s\n", plans.status().message().c_str());
      std::exit(1);
    }
    Case out;
    out.profile = job->profile;
    out.schedules.push_back(plans->baseline.schedule);
    for (const Plan& plan : plans->candidates) out.schedules.push_back(plan.schedule);
    return out;
  }();
  return c;
}

void BM_ReplayTrainingSteps(benchmark::State& state) {
  const Case& c = Llama405b();
  AllocatorOptions options;
  options.expandable_segments = state.range(0) == 1;
  size_t i = 0;
  int64_t micro_steps = 0;
  for (auto _ : state) {
    const Schedule& s = c.schedules[i++ % c.schedules.size()];
    Result<TrainingStepReplay> r = ReplayTrainingSteps(c.profile, s, options);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      break;
    }
    micro_steps += r->summary.micro_steps;
    benchmark::DoNotOptimize(r->reserved_peak_bytes);
  }
  state.counters["plans"] = static_cast<double>(c.schedules.size());
  state.counters["micro_steps"] =
      benchmark::Counter(static_cast<double>(micro_steps), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ReplayTrainingSteps)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_AllocationEvents(benchmark::State& state) {
  const Case& c = Llama405b();
  size_t i = 0;
  int64_t events = 0;
  for (auto _ : state) {
    const Schedule& s = c.schedules[i++ % c.schedules.size()];
    Result<std::vector<AllocEvent>> e = AllocationEvents(c.profile, s);
    if (!e.ok()) {
      state.SkipWithError(e.status().message().c_str());
      break;
    }
    events += static_cast<int64_t>(e->size());
  }
  state.counters["events"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_AllocationEvents)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace remat
