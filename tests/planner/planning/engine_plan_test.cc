// PlanForEngine: exact where an engine's shape plans to the same decisions;
// otherwise no plan of the engine's shapes is better than the one chosen
// (checked against every shape, planned one by one).
#include "remat/planning/engine_plan.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/input/input.h"
#include "remat/plan/plan_memo.h"
#include "remat/planning/planning.h"
#include "remat/strategies/fit_search.h"
#include "remat/strategies/strategies.h"
#include "testing/same_plan.h"

namespace remat {
namespace {

// 4 GPT blocks, hidden 128: small enough to plan every shape in a test.
Job SmallJob() {
  Result<Job> job = LoadJob(REMAT_SOURCE_DIR "/bench/fidelity/models/cpu-s.json", {});
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

Plan PlanWith(const Job& job, PlanOptions o) {
  Result<PlanSet> plans = MakePlan(job.profile, o);
  EXPECT_TRUE(plans.ok()) << plans.status().message();
  return plans->chosen;
}

PlanOptions Uniform(int64_t budget, int every) {
  PlanOptions o;
  o.budget_bytes = budget;
  o.strategy = Strategy::kUniform;
  o.every = every;
  return o;
}

PlanOptions Manual(int64_t budget, std::vector<int> layers) {
  PlanOptions o;
  o.budget_bytes = budget;
  o.strategy = Strategy::kManual;
  o.checkpoint_layers = std::move(layers);
  return o;
}

TEST(EnginePlan, ParsesTheNamesItPrints) {
  for (Engine e : {Engine::kPytorch, Engine::kHf, Engine::kDeepspeed, Engine::kMegatron,
                   Engine::kTorchtitan}) {
    Result<Engine> back = ParseEngine(ToString(e));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, e);
  }
  Result<Engine> bad = ParseEngine("colossal");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pytorch, hf, deepspeed, megatron, torchtitan"),
            std::string::npos);
}

TEST(EnginePlan, ExactWhereTheEngineHasTheShape) {
  const Job job = SmallJob();
  const PlanOptions none_budget;
  struct Case {
    Engine engine;
    PlanOptions options;
    EngineShape shape;
    int n;
  };
  const std::vector<Case> cases = {
      {Engine::kHf, Uniform(0, 1), EngineShape::kChunks, 1},
      {Engine::kHf, Manual(0, {0, 2}), EngineShape::kEveryNthFromFirst, 2},
      {Engine::kHf, Manual(0, {0, 3}), EngineShape::kEveryNthFromFirst, 3},
      {Engine::kHf, Manual(0, {0}), EngineShape::kEveryNthFromFirst, 4},
      {Engine::kDeepspeed, Uniform(0, 3), EngineShape::kChunks, 3},
      {Engine::kMegatron, Uniform(0, 2), EngineShape::kChunks, 2},
      {Engine::kMegatron, Manual(0, {0, 1}), EngineShape::kFirstBlocks, 2},
      {Engine::kTorchtitan, Manual(0, {1, 3}), EngineShape::kEveryNth, 2},
      {Engine::kTorchtitan, Uniform(0, 1), EngineShape::kChunks, 1},
  };
  for (const Case& c : cases) {
    const Plan asked = PlanWith(job, c.options);
    Result<EnginePlan> e = PlanForEngine(job, none_budget, asked, c.engine);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_TRUE(e->exact) << ToString(c.engine) << " " << asked.parameter;
    EXPECT_EQ(e->shape, c.shape) << ToString(c.engine) << " " << asked.parameter;
    EXPECT_EQ(e->n, c.n) << ToString(c.engine) << " " << asked.parameter;
    EXPECT_EQ(e->plan.decisions, asked.decisions);
  }
}

TEST(EnginePlan, PyTorchRunsAnyPlan) {
  const Job job = SmallJob();
  const Plan asked = PlanWith(job, Manual(0, {1, 2}));
  Result<EnginePlan> e = PlanForEngine(job, PlanOptions{}, asked, Engine::kPytorch);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->exact);
  EXPECT_EQ(e->shape, EngineShape::kAsPlanned);
}

// Under budgets from below the lowest peak to above the no-checkpointing
// one: an inexact export is no worse (BetterPlan) than any plan of the
// engine's shapes, each planned here on its own.
TEST(EnginePlan, ClosestIsTheBestOfTheEnginesShapes) {
  const Job job = SmallJob();
  PlanOptions none;
  none.strategy = Strategy::kNone;
  const int64_t top = PlanWith(job, none).memory.total_bytes;
  const Plan asked_shape = PlanWith(job, Manual(0, {1, 2}));  // 1 and 2: no engine but pytorch
  for (int step = 0; step <= 8; ++step) {
    const int64_t budget = top * (6 + step) / 12;
    PlanOptions options;
    options.budget_bytes = budget;
    const Plan asked = PlanWith(job, Manual(budget, {1, 2}));
    ASSERT_EQ(asked.decisions, asked_shape.decisions);
    struct Shapes {
      Engine engine;
      std::vector<PlanOptions> all;
    };
    PlanOptions none_at = none;
    none_at.budget_bytes = budget;
    std::vector<PlanOptions> chunks = {none_at};
    for (int k = 1; k <= 4; ++k) chunks.push_back(Uniform(budget, k));
    const std::vector<Shapes> engines = {
        {Engine::kHf,
         {none_at, Uniform(budget, 1), Manual(budget, {0, 2}), Manual(budget, {0, 3}),
          Manual(budget, {0})}},
        {Engine::kDeepspeed, chunks},
        {Engine::kTorchtitan,
         {none_at, Uniform(budget, 1), Manual(budget, {1, 3}), Manual(budget, {2}),
          Manual(budget, {3})}},
    };
    for (const Shapes& s : engines) {
      Result<EnginePlan> e = PlanForEngine(job, options, asked, s.engine);
      ASSERT_TRUE(e.ok()) << e.status().message();
      EXPECT_FALSE(e->exact) << ToString(s.engine);
      EXPECT_NE(e->plan.decisions, asked.decisions) << ToString(s.engine);
      for (const PlanOptions& o : s.all) {
        const Plan other = PlanWith(job, o);
        EXPECT_FALSE(BetterPlan(other, e->plan))
            << ToString(s.engine) << " at " << budget << ": " << other.parameter << " beats "
            << e->plan.parameter;
      }
    }
  }
}

// A real config's job in mixed bf16 with the whole loss (the one every
// engine but pytorch and hf's Liger-Kernel runs), on `gpus` GPUs with FSDP2
// (1: one GPU).
Job RealJob(const char* config, int64_t gpus, int64_t seq_len, int64_t micro_batch) {
  JobOverrides o;
  o.precision = Precision::kMixedBf16;
  o.seq_len = seq_len;
  o.micro_batch = micro_batch;
  o.loss_chunks = 0;
  if (gpus > 1) {
    Parallelism p;
    p.gpus = gpus;
    p.data = DataParallel::kFsdp2;
    o.parallel = p;
  }
  Result<Job> job =
      LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/" + config + ".config.json", o);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

DeviceMemoryTerms Terms(const char* device, const char* alloc_conf = "") {
  Result<DeviceMemoryTerms> terms =
      ResolveDeviceMemory(device, DeviceMemoryOverrides{}, alloc_conf);
  EXPECT_TRUE(terms.ok()) << terms.status().message();
  EXPECT_TRUE(terms->replays_allocator()) << device;
  return *terms;
}

PlanOptions With(PlanOptions o, const DeviceMemoryTerms& terms, int64_t budget) {
  o.device_memory = terms;
  o.budget_bytes = budget;
  return o;
}

struct DeviceJob {
  const char* name;
  Job job;
  DeviceMemoryTerms terms;
};

std::vector<DeviceJob> DeviceJobs() {
  return {
      {"8b fsdp8 h100", RealJob("llama-3.1-8b", 8, 8192, 2), Terms("h100")},
      {"8b one a100", RealJob("llama-3.1-8b", 1, 4096, 1), Terms("a100")},
      {"8b fsdp8 h100 expandable", RealJob("llama-3.1-8b", 8, 4096, 1),
       Terms("h100", "expandable_segments:True")},
      {"70b fsdp64 h200", RealJob("llama-3.1-70b", 64, 8192, 1), Terms("h200")},
      {"small h100", SmallJob(), Terms("h100")},
  };
}

// The budgets around a job's plans: none's device total, uniform every 1's
// (the least of the fixed shapes), between them, just under every 1's
// (nothing fits), half of it, and no budget.
std::vector<int64_t> BudgetsAround(const DeviceJob& d) {
  PlanOptions none;
  none.strategy = Strategy::kNone;
  const int64_t top = PlanWith(d.job, With(none, d.terms, 0)).memory.total_bytes;
  const int64_t low = PlanWith(d.job, With(Uniform(0, 1), d.terms, 0)).memory.total_bytes;
  return {0, top, low + (top - low) / 2, low, low - 1, low / 2};
}

// The shapes whose decisions follow from their n alone (PlanForEngine's
// fixed shapes: none, chunks of n blocks, a layer list) planned with the
// device terms are their plans without them (no budget), accounted with
// the terms against the budget (AccountPlanMemory): PlanForEngine accounts
// only those that can be the closest.
TEST(EnginePlan, AFixedShapesPlanIsItsTensorsPlanAccounted) {
  int fitting = 0, not_fitting = 0;
  for (const DeviceJob& d : DeviceJobs()) {
    const PlanMemo memo(d.job.profile);
    const int blocks = static_cast<int>(BlockLayers(d.job.profile).size());
    std::vector<int> every_2nd, from_first_3rd;
    for (int i = 1; i < blocks; i += 2) every_2nd.push_back(i);
    for (int i = 0; i < blocks; i += 3) from_first_3rd.push_back(i);
    PlanOptions none;
    none.strategy = Strategy::kNone;
    const std::vector<PlanOptions> shapes = {none,
                                             Uniform(0, 1),
                                             Uniform(0, 2),
                                             Uniform(0, blocks),
                                             Manual(0, {0}),
                                             Manual(0, every_2nd),
                                             Manual(0, from_first_3rd),
                                             Manual(0, {0, 1, 2})};
    for (int64_t budget : BudgetsAround(d)) {
      for (const PlanOptions& shape : shapes) {
        SCOPED_TRACE(std::string(d.name) + " at " + std::to_string(budget) + ": " +
                     ToString(shape.strategy) + " every " + std::to_string(shape.every) + ", " +
                     std::to_string(shape.checkpoint_layers.size()) + " listed");
        const Plan full = PlanWith(d.job, With(shape, d.terms, budget));
        Plan tensors = PlanWith(d.job, shape);
        ASSERT_TRUE(AccountPlanMemory(d.job.profile, d.terms, budget, &tensors).ok());
        testing::ExpectSamePlan(tensors, full);
        (full.fits ? fitting : not_fitting) += 1;
      }
    }
  }
  EXPECT_GT(fitting, 20);
  EXPECT_GT(not_fitting, 20);
}

// PlanForEngine plans a shape as MakePlan does, none's plan made once per
// budget and device terms: a shape's plan is its strategy's search alone
// (none's plan made first or not), and none's plan is the same whatever
// the shape's strategy, every, listed layers and selective layers.
TEST(EnginePlan, AShapesPlanIsItsSearchAloneAndNonesIsEveryShapes) {
  int compared = 0;
  for (const DeviceJob& d : DeviceJobs()) {
    if (std::string(d.name).find("70b") != std::string::npos) continue;  // 80 blocks: slow
    const PlanMemo memo(d.job.profile);
    const int blocks = static_cast<int>(BlockLayers(d.job.profile).size());
    std::vector<int> every_2nd, all;
    for (int i = 1; i < blocks; i += 2) every_2nd.push_back(i);
    for (int i = 0; i < blocks; ++i) all.push_back(i);
    PlanOptions none;
    none.strategy = Strategy::kNone;
    PlanOptions selective;
    selective.strategy = Strategy::kSelective;
    selective.selective_layers = all;
    const std::vector<PlanOptions> shapes = {
        none, Uniform(0, 1), Uniform(0, 0), Manual(0, {0}), Manual(0, every_2nd), selective};
    std::vector<int64_t> budgets = BudgetsAround(d);
    budgets.push_back(0);
    for (int64_t budget : budgets) {
      for (bool with_terms : {false, true}) {
        std::optional<Plan> first_none;
        for (const PlanOptions& shape : shapes) {
          SCOPED_TRACE(std::string(d.name) + " at " + std::to_string(budget) +
                       (with_terms ? " with terms: " : ": ") + ToString(shape.strategy) +
                       " every " + std::to_string(shape.every) + ", " +
                       std::to_string(shape.checkpoint_layers.size()) + " listed");
          const PlanOptions o =
              With(shape, with_terms ? d.terms : DeviceMemoryTerms{}, budget);
          FitSearch alone(d.job.profile, o);
          Result<Plan> own = alone.Of(o.strategy);
          ASSERT_TRUE(own.ok()) << own.status().message();
          testing::ExpectSamePlan(*own, PlanWith(d.job, o));
          FitSearch for_none(d.job.profile, o);
          Result<Plan> none_plan = for_none.Of(Strategy::kNone);
          ASSERT_TRUE(none_plan.ok()) << none_plan.status().message();
          if (!first_none) {
            first_none = *none_plan;
          } else {
            testing::ExpectSamePlan(*none_plan, *first_none);
          }
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// On device terms that replay the allocator the closest shape is the one
// the scan over every shape planned in full keeps (BetterPlan), its plan
// figure for figure: at budgets where none fits, where the slowest alone
// fits, where nothing fits, and without a budget.
TEST(EnginePlan, TheClosestOnDeviceIsTheFullScans) {
  for (const DeviceJob& d : DeviceJobs()) {
    if (std::string(d.name).find("70b") != std::string::npos) continue;  // 80 blocks: slow
    const int blocks = static_cast<int>(BlockLayers(d.job.profile).size());
    const int first = BlockLayers(d.job.profile).front();
    const std::vector<SelectiveOption>& s = d.job.profile.layers[first].selective;
    const bool attention_core = !s.empty() && s.front().name == kAttentionCoreOption;
    PlanOptions none;
    none.strategy = Strategy::kNone;
    struct Shape {
      EngineShape shape;
      int n;
      PlanOptions options;
    };
    std::vector<Shape> titan = {{EngineShape::kNone, 0, none},
                                {EngineShape::kChunks, 1, Uniform(0, 1)}};
    std::vector<Shape> hf = titan;
    for (int n = 2; n <= blocks; ++n) {
      std::vector<int> nth, from_first;
      for (int i = n - 1; i < blocks; i += n) nth.push_back(i);
      for (int i = 0; i < blocks; i += n) from_first.push_back(i);
      titan.push_back({EngineShape::kEveryNth, n, Manual(0, nth)});
      hf.push_back({EngineShape::kEveryNthFromFirst, n, Manual(0, from_first)});
    }
    std::vector<Shape> megatron = {{EngineShape::kNone, 0, none},
                                   {EngineShape::kChunks, -1, Uniform(0, 0)}};
    if (attention_core) {
      PlanOptions selective;
      selective.strategy = Strategy::kSelective;
      for (int i = 0; i < blocks; ++i) selective.selective_layers.push_back(i);
      megatron.push_back({EngineShape::kSelectiveAttention, 0, selective});
    }
    const std::vector<std::pair<Engine, std::vector<Shape>>> engines = {
        {Engine::kTorchtitan, titan}, {Engine::kHf, hf}, {Engine::kMegatron, megatron}};
    for (int64_t budget : BudgetsAround(d)) {
      const PlanMemo memo(d.job.profile);
      // Blocks 1 and 2: no shape of these engines.
      const PlanOptions asked_options = With(Manual(0, {1, 2}), d.terms, budget);
      const Plan asked = PlanWith(d.job, asked_options);
      for (const auto& [engine, shapes] : engines) {
        SCOPED_TRACE(std::string(d.name) + " at " + std::to_string(budget) + ", " +
                     ToString(engine));
        Result<EnginePlan> e = PlanForEngine(d.job, asked_options, asked, engine);
        ASSERT_TRUE(e.ok()) << e.status().message();
        ASSERT_FALSE(e->exact);
        size_t best = 0;
        std::vector<Plan> plans;
        for (size_t i = 0; i < shapes.size(); ++i) {
          plans.push_back(PlanWith(d.job, With(shapes[i].options, d.terms, budget)));
          if (BetterPlan(plans[i], plans[best])) best = i;
        }
        EXPECT_EQ(e->shape, shapes[best].shape);
        if (shapes[best].n >= 0) EXPECT_EQ(e->n, shapes[best].n);
        testing::ExpectSamePlan(e->plan, plans[best]);
      }
    }
  }
}

// The small job over a host link (the `cpu` preset's rate and latency).
Job LinkedJob(bool overlapped) {
  Job job = SmallJob();
  job.profile.host_link.name = overlapped ? "custom" : "cpu";
  job.profile.host_link.gb_per_s = 10;
  job.profile.host_link.latency_us = 1;
  job.profile.host_link.overlapped = overlapped;
  return job;
}

PlanOptions Offload(int64_t budget, int every) {
  PlanOptions o = Uniform(budget, every);
  o.strategy = Strategy::kOffload;
  return o;
}

// hf's offload: every block checkpointed and every movable checkpoint
// offloaded, copies in line. Exact over an in-line link; over an overlapped
// one the closest, planned on the link made in line (its own prediction),
// and never beaten by hf's other shapes.
TEST(EnginePlan, HfOffloadsEveryBlockWithInLineCopies) {
  const Job in_line = LinkedJob(false);
  const Plan all = PlanWith(in_line, Offload(0, 1));
  ASSERT_EQ(all.parameter, "every 1, 3 offloaded");
  Result<EnginePlan> e = PlanForEngine(in_line, PlanOptions{}, all, Engine::kHf);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->exact);
  EXPECT_EQ(e->shape, EngineShape::kEveryBlockOffloaded);
  // A checkpoint every other block, offloaded: not a shape of hf's.
  const Plan partial = PlanWith(in_line, Offload(0, 2));
  ASSERT_EQ(partial.parameter, "every 2, 1 offloaded");
  Result<EnginePlan> not_hf = PlanForEngine(in_line, PlanOptions{}, partial, Engine::kHf);
  ASSERT_TRUE(not_hf.ok()) << not_hf.status().message();
  EXPECT_FALSE(not_hf->exact);
  const Job overlapped = LinkedJob(true);
  const Plan asked = PlanWith(overlapped, Offload(0, 1));
  PlanOptions none;
  none.strategy = Strategy::kNone;
  const int64_t top = PlanWith(overlapped, none).memory.total_bytes;
  const int64_t low = all.memory.total_bytes;
  int offloaded = 0;
  for (int step = 0; step <= 8; ++step) {
    const int64_t budget = low + (top - low) * step / 16;
    PlanOptions options;
    options.budget_bytes = budget;
    Result<EnginePlan> hf = PlanForEngine(overlapped, options, asked, Engine::kHf);
    ASSERT_TRUE(hf.ok()) << hf.status().message();
    EXPECT_FALSE(hf->exact) << budget;
    Plan at = all;  // the in-line plan at this budget
    ASSERT_TRUE(AccountPlanMemory(in_line.profile, {}, budget, &at).ok());
    const std::vector<Plan> others = {PlanWith(overlapped, Uniform(budget, 1)),
                                      PlanWith(overlapped, Manual(budget, {0, 2})),
                                      PlanWith(overlapped, Manual(budget, {0, 3})),
                                      PlanWith(overlapped, Manual(budget, {0})), at};
    for (const Plan& other : others) {
      EXPECT_FALSE(BetterPlan(other, hf->plan)) << budget << ": " << other.parameter;
    }
    if (hf->shape != EngineShape::kEveryBlockOffloaded) continue;
    ++offloaded;
    EXPECT_EQ(hf->plan.parameter, "every 1, 3 offloaded, copies in line");
    EXPECT_EQ(hf->plan.decisions, asked.decisions);
    EXPECT_EQ(hf->plan.predicted.step_ms, all.predicted.step_ms);
    EXPECT_EQ(hf->plan.memory.total_bytes, all.memory.total_bytes);
  }
  EXPECT_GT(offloaded, 0);
}

// A Llama and a GPT job with the chunked loss: the engines' configurations
// run it (remat.apply; hf through Liger-Kernel on the llama family, at its
// own count) or not (the rest, and hf for GPT-2), and a shape is planned on
// the job its configuration runs.
Job ChunkedJob(const char* architecture, int64_t loss_chunks) {
  JobOverrides o;
  o.loss_chunks = loss_chunks;
  Result<PlannerInput> in = ParsePlannerInput(
      std::string(R"({"architecture": ")") + architecture +
          R"(", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 4096,
             "seq_len": 256, "micro_batch": 2, "dropout": 0})",
      "chunked.json");
  EXPECT_TRUE(in.ok()) << in.status().message();
  Result<Job> job = MakeJob(*in, o);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

TEST(EnginePlan, EnginesRunTheChunkedLossTheirConfigurationsHave) {
  const Job llama = ChunkedJob("llama", kLossChunksAuto);
  // 512 tokens, ceil(4096 / 64) = 64: chunks of 8 rows.
  const int64_t liger = WithDefaults(llama.config()).loss_chunks;
  ASSERT_EQ(liger, 64);
  EXPECT_EQ(EngineLossChunks(Engine::kPytorch, llama), liger);
  EXPECT_EQ(EngineLossChunks(Engine::kHf, llama), liger);
  for (Engine e : {Engine::kDeepspeed, Engine::kMegatron, Engine::kTorchtitan}) {
    EXPECT_EQ(EngineLossChunks(e, llama), 0) << ToString(e);
  }
  const Job gpt = ChunkedJob("gpt", kLossChunksAuto);
  EXPECT_EQ(EngineLossChunks(Engine::kHf, gpt), 0);  // Liger-Kernel patches no GPT-2
  EXPECT_EQ(EngineLossChunks(Engine::kPytorch, gpt), WithDefaults(gpt.config()).loss_chunks);
  const Job other = ChunkedJob("llama", 4);  // not Liger-Kernel's count
  EXPECT_EQ(EngineLossChunks(Engine::kHf, other), liger);
  EXPECT_EQ(EngineLossChunks(Engine::kHf, ChunkedJob("llama", 0)), 0);

  PlanOptions options = Uniform(1'000'000'000'000, 1);
  const Plan asked = PlanWith(llama, options);
  Result<EnginePlan> hf = PlanForEngine(llama, options, asked, Engine::kHf);
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  EXPECT_TRUE(hf->exact);
  EXPECT_EQ(hf->loss_chunks, liger);
  EXPECT_EQ(hf->asked_loss_chunks, liger);
  // deepspeed has the shape (chunks of 1 block) but not the chunked loss:
  // its shapes are planned on the job without it, where at this budget
  // none is the fastest that fits: that job's own plan and prediction.
  Result<EnginePlan> ds = PlanForEngine(llama, options, asked, Engine::kDeepspeed);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_FALSE(ds->exact);
  EXPECT_EQ(ds->loss_chunks, 0);
  EXPECT_EQ(ds->shape, EngineShape::kNone);
  PlanOptions none;
  none.budget_bytes = options.budget_bytes;
  none.strategy = Strategy::kNone;
  const Plan plain = PlanWith(ChunkedJob("llama", 0), none);
  EXPECT_EQ(ds->plan.memory.total_bytes, plain.memory.total_bytes);
  EXPECT_GT(ds->plan.memory.total_bytes, asked.memory.total_bytes);
  // hf with another count than Liger-Kernel's: the closest, at Liger's count.
  const Plan asked_other = PlanWith(other, options);
  Result<EnginePlan> hf_other = PlanForEngine(other, options, asked_other, Engine::kHf);
  ASSERT_TRUE(hf_other.ok()) << hf_other.status().message();
  EXPECT_FALSE(hf_other->exact);
  EXPECT_EQ(hf_other->asked_loss_chunks, 4);
  EXPECT_EQ(hf_other->loss_chunks, liger);
}

}  // namespace
}  // namespace remat
