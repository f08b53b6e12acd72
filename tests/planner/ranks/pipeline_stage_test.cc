// Pipeline parallelism: the micro-batches each rank holds in flight, the
// stage profiles, the simulator's hold of the other micro-batches and the
// plans made for a stage.
#include "remat/ranks/pipeline.h"

#include <gtest/gtest.h>

#include "remat/plan/plan_memo.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "testing/gpt_chain.h"
#include "testing/same_plan.h"

namespace remat {
namespace {

Parallelism Pipeline(int64_t stages, int64_t virtual_stages = 1) {
  Parallelism p;
  p.pipeline = stages;
  p.gpus = stages;
  if (virtual_stages > 1) {
    p.schedule = PipelineSchedule::kInterleaved;
    p.virtual_stages = virtual_stages;
  }
  return p;
}

std::vector<int64_t> InFlight(const Parallelism& p, int64_t rank, int64_t m) {
  Result<std::vector<int64_t>> r = InFlightMicrobatches(p, rank, m);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<int64_t>{};
}

// 1F1B (PipeDream-flush): stage s holds min(p - s, M).
TEST(PipelineInFlight, OneForwardOneBackward) {
  const Parallelism p = Pipeline(4);
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(InFlight(p, s, 8), std::vector<int64_t>{4 - s});
  EXPECT_EQ(InFlight(p, 0, 2), std::vector<int64_t>{2});  // fewer micro-batches than stages
  EXPECT_EQ(InFlight(p, 3, 2), std::vector<int64_t>{1});
}

// Interleaved, p = 4, v = 2, M = 8: megatron-core 0.16.1's
// get_pp_rank_microbatches (warm-up 2 (p - r - 1) + (v - 1) p) and
// get_schedule_table (groups of p micro-batches per chunk), one more forward
// for the first steady-state step. Rank 0 holds p v + p - 1 = 11 chunk
// forwards: 2p - 1 of its first chunk, p of its second.
TEST(PipelineInFlight, InterleavedAsMegatronCore) {
  const Parallelism p = Pipeline(4, 2);
  EXPECT_EQ(InFlight(p, 0, 8), (std::vector<int64_t>{7, 4}));
  EXPECT_EQ(InFlight(p, 1, 8), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(InFlight(p, 2, 8), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(InFlight(p, 3, 8), (std::vector<int64_t>{4, 1}));
  // All in warm-up: M v chunk forwards at most.
  EXPECT_EQ(InFlight(Pipeline(4, 3), 0, 4), (std::vector<int64_t>{4, 4, 4}));
}

TEST(PipelineInFlight, RefusesWhatMegatronRefuses) {
  Result<std::vector<int64_t>> r = InFlightMicrobatches(Pipeline(4, 2), 0, 6);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multiple of the 4 pipeline stages"), std::string::npos)
      << r.status().message();
  r = InFlightMicrobatches(Pipeline(4), 4, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pipeline rank 4 is outside [0, 4)"), std::string::npos);
  Result<std::vector<int64_t>> even = EvenChunkBlocks(Pipeline(4), 6);
  ASSERT_FALSE(even.ok());
  EXPECT_NE(even.status().message().find("must divide the 6 blocks"), std::string::npos);
}

std::vector<std::string> Names(const Profile& p) {
  std::vector<std::string> out;
  for (const LayerProfile& l : p.layers) out.push_back(l.name);
  return out;
}

TEST(PipelineStage, EndStagesTakeTheEmbeddingAndTheHead) {
  const Profile model = testing::GptChain(8, 1);
  const Parallelism p = Pipeline(4);
  const std::vector<int64_t> split = EvenChunkBlocks(p, 8).value();
  const StaticMemory state{1000, 0, 2000};
  Result<Profile> first = StageProfile(model, p, 0, split, 8, state);
  Result<Profile> last = StageProfile(model, p, 3, split, 8, state);
  ASSERT_TRUE(first.ok() && last.ok()) << first.status().message();
  EXPECT_EQ(Names(*first), (std::vector<std::string>{"embedding", "block0", "block1"}));
  EXPECT_EQ(Names(*last),
            (std::vector<std::string>{"block6", "block7", "final_norm", "head", "loss"}));
  for (const LayerProfile& l : first->layers) EXPECT_EQ(l.in_flight_microbatches, 4);
  for (const LayerProfile& l : last->layers) EXPECT_EQ(l.in_flight_microbatches, 1);
  EXPECT_EQ(first->static_bytes(), 3000);
  EXPECT_EQ(first->grad_accumulation, 8);
  // Uneven splits are the caller's to choose.
  Result<Profile> uneven = StageProfile(model, p, 0, {1, 3, 3, 1}, 8, state);
  ASSERT_TRUE(uneven.ok());
  EXPECT_EQ(Names(*uneven), (std::vector<std::string>{"embedding", "block0"}));
  EXPECT_FALSE(StageProfile(model, p, 0, {2, 2, 2, 3}, 8, state).ok());
}

TEST(PipelineStage, InterleavedRankRunsItsChunks) {
  const Profile model = testing::GptChain(8, 1);
  const Parallelism p = Pipeline(2, 2);
  Result<Profile> rank0 = StageProfile(model, p, 0, EvenChunkBlocks(p, 8).value(), 4, {});
  ASSERT_TRUE(rank0.ok()) << rank0.status().message();
  EXPECT_EQ(Names(*rank0),
            (std::vector<std::string>{"embedding", "block0", "block1", "block4", "block5"}));
  // p = 2, v = 2, M = 4: 2 (p - 1) + p = 4 warm-up chunk forwards and one
  // more: 3 of chunk 0, 2 of chunk 2.
  EXPECT_EQ(rank0->layers[0].in_flight_microbatches, 3);
  EXPECT_EQ(rank0->layers[2].in_flight_microbatches, 3);
  EXPECT_EQ(rank0->layers[3].in_flight_microbatches, 2);
}

Plan Planned(const Profile& p, Strategy s, int64_t budget = 0,
             std::vector<int> checkpoint_layers = {}) {
  PlanOptions o;
  o.strategy = s;
  o.budget_bytes = budget;
  o.checkpoint_layers = std::move(checkpoint_layers);
  Result<PlanSet> set = MakePlan(p, o);
  EXPECT_TRUE(set.ok()) << set.status().message();
  return set.ok() ? set->chosen : Plan{};
}

// A middle stage holds (k - 1) times what one micro-batch keeps at its turn
// beside the one it runs: with nothing recomputed, its input and every
// layer's saved tensors and outputs but the stage's own output (sent on).
TEST(PipelineStage, SimulatorHoldsTheOtherMicrobatches) {
  const Profile model = testing::GptChain(8, 1);
  const Parallelism p = Pipeline(4);
  const std::vector<int64_t> split = EvenChunkBlocks(p, 8).value();
  Profile stage = StageProfile(model, p, 1, split, 8, model.static_memory).value();
  ASSERT_EQ(stage.layers[0].in_flight_microbatches, 3);
  Profile alone = stage;
  for (LayerProfile& l : alone.layers) l.in_flight_microbatches = 1;

  const Plan keep = Planned(stage, Strategy::kNone);
  int64_t kept = stage.layers[0].input_bytes - stage.layers.back().output_bytes;
  for (const LayerProfile& l : stage.layers) kept += l.activation_bytes;
  EXPECT_EQ(keep.predicted.in_flight_bytes, 2 * kept);
  const SimulationResult one = Simulate(alone, keep.schedule).value();
  EXPECT_EQ(one.in_flight_bytes, 0);
  EXPECT_EQ(keep.predicted.peak_bytes, one.peak_bytes + 2 * kept);

  // Checkpointing both blocks keeps their inputs only: less held in flight.
  const Plan checkpointed = Planned(stage, Strategy::kManual, 0, {0, 1});
  EXPECT_GT(checkpointed.predicted.recompute_ops, 0);
  EXPECT_LT(checkpointed.predicted.in_flight_bytes, keep.predicted.in_flight_bytes);
  const SimulationResult one_ck = Simulate(alone, checkpointed.schedule).value();
  EXPECT_EQ(checkpointed.predicted.peak_bytes,
            one_ck.peak_bytes + checkpointed.predicted.in_flight_bytes);
}

// The first stage of 4 holds 4 micro-batches. At a budget halfway between
// the peak of checkpointing both blocks and that of keeping everything, the
// solvers must checkpoint, their plans fit when simulated on the stage, and
// none is slower than the checkpointed plan known to fit.
TEST(PipelineStage, SolversPlanTheStageWithinItsBudget) {
  const Profile model = testing::GptChain(8, 2);
  const Parallelism p = Pipeline(4);
  const std::vector<int64_t> split = EvenChunkBlocks(p, 8).value();
  const Profile stage = StageProfile(model, p, 0, split, 8, model.static_memory).value();
  const Plan keep = Planned(stage, Strategy::kNone);
  const Plan checkpointed = Planned(stage, Strategy::kManual, 0, {0, 1});
  ASSERT_LT(checkpointed.predicted.peak_bytes, keep.predicted.peak_bytes);
  const int64_t budget = (checkpointed.predicted.peak_bytes + keep.predicted.peak_bytes) / 2;
  for (Strategy s : {Strategy::kOptimal, Strategy::kOptimalSingle, Strategy::kAuto}) {
    const Plan plan = Planned(stage, s, budget);
    EXPECT_TRUE(plan.fits) << ToString(s);
    const SimulationResult sim = Simulate(stage, plan.schedule).value();
    EXPECT_LE(sim.peak_bytes, budget) << ToString(s);
    EXPECT_GT(sim.in_flight_bytes, 0) << ToString(s);
    EXPECT_GT(sim.recompute_ms, 0) << ToString(s);
    EXPECT_LE(sim.step_ms, checkpointed.predicted.step_ms + 1e-9) << ToString(s);
  }
}

// Near a stage's lowest peak the slots the DP is given hold one micro-batch
// and it overshoots by the others' hold; lowering its slot count lowers
// what every level keeps, where setting aside a reserve for the hold lets
// it keep checkpoints that cost little in flight and save recomputation.
// MakePlan takes the better: here the reserve's (GPT-2 small shape, 8
// blocks, micro-batch 2, first of 4 stages, 16 micro-batches: 4 in flight).
// The first of `stages` stages of an 8-block GPT-2-small-shaped chain at
// micro-batch 2, 16 micro-batches a step; the peaks of the optimal DP's
// lowest-peak plan and of keeping everything.
struct FirstStage {
  explicit FirstStage(int64_t stages) {
    const Profile model = testing::GptChain(8, 2);
    const Parallelism p = Pipeline(stages);
    stage = StageProfile(model, p, 0, EvenChunkBlocks(p, 8).value(), 16, model.static_memory)
                .value();
    // The DP's own lowest peak (MakePlan's may be a contained strategy's).
    PlanOptions least;
    least.strategy = Strategy::kOptimal;
    least.budget_bytes = 1;
    low = FindSolver(Strategy::kOptimal)->Solve(stage, least).value().predicted.peak_bytes;
    keep = Planned(stage, Strategy::kNone).predicted.peak_bytes;
  }
  Profile stage;
  int64_t low = 0, keep = 0;
};

TEST(PipelineStage, AReserveForTheHoldPlansFasterNearTheLowestPeak) {
  const FirstStage first(4);
  const Profile& stage = first.stage;
  PlanOptions o;
  o.budget_bytes = first.low + (first.keep - first.low) / 20;
  for (Strategy s : {Strategy::kOptimal, Strategy::kOptimalSingle}) {
    o.strategy = s;
    const Plan direct = FindSolver(s)->Solve(stage, o).value();
    const Plan plan = Planned(stage, s, o.budget_bytes);
    ASSERT_TRUE(direct.fits && plan.fits) << ToString(s);
    EXPECT_LE(plan.predicted.peak_bytes, o.budget_bytes) << ToString(s);
    EXPECT_LT(plan.predicted.step_ms, direct.predicted.step_ms) << ToString(s);
  }
}

// A stage of one block beside the embedding, 8 in flight: the reserve
// search finds nothing that fits, the DP's own search does.
TEST(PipelineStage, TheDpsOwnSearchStandsWhereTheReserveFails) {
  const FirstStage first(8);
  const int64_t budget = first.low + (first.keep - first.low) / 2;
  for (Strategy s : {Strategy::kOptimal, Strategy::kOptimalSingle}) {
    const Plan plan = Planned(first.stage, s, budget);
    EXPECT_TRUE(plan.fits) << ToString(s);
    EXPECT_LE(plan.predicted.peak_bytes, budget) << ToString(s);
  }
}

// The reserve search solves each reserve's profile (one micro-batch in
// flight, the reserve added to the parameters) with a memo open on it that
// the strategies searched together share: optimal-single's plans, then
// optimal's (which asks optimal-single's at its budgets), then both again
// (answered from the memo) are the plans solved without one.
TEST(PipelineStage, AReservesProfileSolvesTheSameWithItsMemoOpen) {
  const FirstStage first(4);
  Profile reserved = first.stage;
  for (LayerProfile& l : reserved.layers) l.in_flight_microbatches = 1;
  reserved.static_memory.parameter_bytes += (first.keep - first.low) / 8;
  const std::vector<int64_t> budgets = {first.low + (first.keep - first.low) / 20,
                                        first.low + (first.keep - first.low) / 2};
  const std::vector<Strategy> strategies = {Strategy::kOptimalSingle, Strategy::kOptimal};
  std::vector<Plan> alone;
  for (int64_t budget : budgets) {
    for (Strategy s : strategies) {
      PlanOptions o;
      o.strategy = s;
      o.budget_bytes = budget;
      alone.push_back(FindSolver(s)->Solve(reserved, o).value());
    }
  }
  const PlanMemo memo(reserved);
  for (int pass = 0; pass < 2; ++pass) {
    size_t i = 0;
    for (int64_t budget : budgets) {
      for (Strategy s : strategies) {
        SCOPED_TRACE(std::string(ToString(s)) + " at " + std::to_string(budget) + ", pass " +
                     std::to_string(pass));
        PlanOptions o;
        o.strategy = s;
        o.budget_bytes = budget;
        testing::ExpectSamePlan(FindSolver(s)->Solve(reserved, o).value(), alone[i++]);
      }
    }
  }
  EXPECT_GT(memo.stats().simulations_reused, 0);
}

TEST(PipelineStage, ProfileJsonCarriesTheMicrobatchesInFlight) {
  Profile stage =
      StageProfile(testing::GptChain(4, 1), Pipeline(2), 0, {2, 2}, 4, StaticMemory{}).value();
  const std::string json = ProfileToJson(stage);
  EXPECT_NE(json.find("\"in_flight_microbatches\""), std::string::npos);
  Result<Profile> back = ParseProfile(json, "stage.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->layers[1].in_flight_microbatches, 2);
  // A single rank's profile has no such key.
  EXPECT_EQ(ProfileToJson(testing::GptChain(4, 1)).find("in_flight"), std::string::npos);
  stage.layers[1].in_flight_microbatches = 0;
  Status bad = ValidateProfile(stage, "stage.json");
  EXPECT_NE(bad.message().find("'in_flight_microbatches': must be in [1, 1000000], got 0"),
            std::string::npos)
      << bad.message();
}

}  // namespace
}  // namespace remat
