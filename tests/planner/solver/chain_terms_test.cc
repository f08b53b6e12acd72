// The solvers' memory and time model (solver/chain_terms.h) against the
// simulator: for arbitrary interval choices, the peak the model predicts is
// the simulated peak, to the byte.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "remat/simulate/simulator.h"
#include "solver/chain_terms.h"
#include "solver/interval_bounds.h"
#include "solver/op_emitter.h"
#include "testing/chains.h"

namespace remat::solver {
namespace {

class RandomChoices {
 public:
  RandomChoices(const ChainTerms& terms, uint32_t seed) : terms_(terms), rng_(seed) {}

  IntervalChoice operator()(int s, int t, int64_t) const {
    auto it = chosen_.find({s, t});
    if (it != chosen_.end()) return it->second;
    IntervalChoice c;
    if (t > s + 1 && rng_() % 2) {
      c.split = s + 1 + static_cast<int>(rng_() % (t - s - 1));
    } else {
      c.mode = static_cast<int>(rng_() % terms_.num_modes(s));
    }
    return chosen_[{s, t}] = c;
  }

  // The model's peak (bytes, on exact units) of interval (s, t) under the choices.
  int64_t Need(int s, int t) const {
    const IntervalChoice c = (*this)(s, t, 0);
    if (c.split == 0) {
      int64_t need = std::max(terms_.ForwardNeed(s, t, c.mode), terms_.backward_need(s, c.mode));
      if (t > s + 1) need = std::max(need, terms_.keep(s, c.mode) + Need(s + 1, t));
      return need;
    }
    int64_t sweep_bytes = 0;
    for (const SweepStep& step : terms_.sweep(s, t)) {
      if (step.first_split <= c.split) sweep_bytes = step.bytes;
    }
    return std::max({terms_.SweepNeed(s, t, sweep_bytes), terms_.x(s) + Need(c.split, t),
                     Need(s, c.split)});
  }

  double RecomputeMs(int s, int t) const {
    const IntervalChoice c = (*this)(s, t, 0);
    if (c.split == 0) {
      return terms_.mode(s, c.mode).extra_ms + (t > s + 1 ? RecomputeMs(s + 1, t) : 0);
    }
    return terms_.ForwardMs(s, c.split) + RecomputeMs(c.split, t) + RecomputeMs(s, c.split);
  }

 private:
  const ChainTerms& terms_;
  mutable std::mt19937 rng_;
  mutable std::map<std::pair<int, int>, IntervalChoice> chosen_;
};

// The random choices of `seed` over `p`'s whole chain, emitted and
// simulated: the interval model's peak (and recompute time) against the
// simulator's.
void ExpectTheSimulatedPeak(const Profile& p, uint32_t seed) {
  const ChainTerms terms(p, MemoryUnits::Bytes(int64_t{1} << 40));
  const RandomChoices choices(terms, seed);
  OpEmitter emitter(p.num_layers());
  EmitInterval(terms, 0, p.num_layers(), 0, choices, &emitter);
  const Schedule schedule = AddFrees(emitter.Finish(), p.num_layers());
  Result<SimulationResult> sim = Simulate(p, schedule);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_EQ(sim->activation_peak_bytes, choices.Need(0, p.num_layers())) << p.model;
  EXPECT_NEAR(sim->recompute_ms, choices.RecomputeMs(0, p.num_layers()), 1e-9) << p.model;
}

Profile RandomChainOf(uint32_t seed) {
  return seed % 3 == 0 ? testing::TransformerChain(1 + seed % 7, seed)
                       : testing::RandomChain(1 + seed % 12, seed);
}

TEST(IntervalModel, PredictsTheSimulatedPeakAndRecomputeTime) {
  for (uint32_t seed = 1; seed <= 60; ++seed) ExpectTheSimulatedPeak(RandomChainOf(seed), seed);
}

// Backwards that release saved bytes before their peaks (a negative
// workspace, selective options' recompute workspaces on top): the model's
// peak is still the simulated one, where the release never exceeds a[s].
TEST(IntervalModel, PredictsTheSimulatedPeakWithNegativeBackwardWorkspaces) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const Profile p = testing::WithNegativeBackwardWorkspaces(RandomChainOf(seed), seed);
    ASSERT_TRUE(ValidateProfile(p, p.model).ok());
    ExpectTheSimulatedPeak(p, seed);
  }
}

// Layers that gather their weights again when recomputed in backward
// (FSDP2 per-block units, ZeRO-3): the model counts the gather in every
// recompute another recompute follows, as the simulator does.
TEST(IntervalModel, CountsTheRecomputeGathersAsTheSimulator) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    Profile p = RandomChainOf(seed);
    std::mt19937 rng(seed);
    for (LayerProfile& l : p.layers) {
      if (rng() % 3 != 0) l.recompute_gather_bytes = 1 + rng() % (int64_t{1} << 30);
    }
    ExpectTheSimulatedPeak(p, seed);
  }
}

// The sweeps made once for a profile (ChainSweeps) and shared by terms of
// many budgets and roundings are what terms made alone have: the same
// steps, the same step of every split, the same sweep needs, in forward
// and (layers gathering on recompute) inside backward.
TEST(IntervalModel, SharedSweepsAreTheTermsOwn) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    Profile p = RandomChainOf(seed);
    std::mt19937 rng(seed);
    if (seed % 2 == 0) {
      for (LayerProfile& l : p.layers) {
        if (rng() % 3 != 0) l.recompute_gather_bytes = 1 + rng() % (int64_t{1} << 30);
      }
    }
    const auto shared = std::make_shared<const ChainSweeps>(p);
    const int L = p.num_layers();
    for (int64_t budget : {int64_t{1} << 20, int64_t{1} << 32, int64_t{3} << 36}) {
      for (Rounding r : {Rounding::kUp, Rounding::kDown}) {
        const MemoryUnits units(budget, 500 + seed, r, RecurringKeepBytes(p));
        const ChainTerms alone(p, units);
        const ChainTerms sharing(p, units, shared);
        for (int s = 0; s < L; ++s) {
          for (int t = s + 1; t <= L; ++t) {
            ASSERT_EQ(alone.sweep(s, t).size(), sharing.sweep(s, t).size());
            for (size_t i = 0; i < alone.sweep(s, t).size(); ++i) {
              EXPECT_EQ(alone.sweep(s, t)[i].first_split, sharing.sweep(s, t)[i].first_split);
              EXPECT_EQ(alone.sweep(s, t)[i].bytes, sharing.sweep(s, t)[i].bytes);
              EXPECT_EQ(alone.SweepNeed(s, t, alone.sweep(s, t)[i].bytes),
                        sharing.SweepNeed(s, t, sharing.sweep(s, t)[i].bytes));
            }
            for (int sp = s + 1; sp < L; ++sp) {
              EXPECT_EQ(alone.sweep_step(s, t, sp), sharing.sweep_step(s, t, sp));
            }
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(IntervalModel, FloorIsTheLowestPeakSchedulesSimulatedPeak) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    // The second half with negative backward workspaces.
    const Profile p = seed <= 20 ? testing::RandomChain(1 + seed % 10, seed)
                                 : testing::WithNegativeBackwardWorkspaces(
                                       testing::RandomChain(1 + seed % 10, seed), seed);
    const ChainTerms terms(p, MemoryUnits::Bytes(int64_t{1} << 40));
    const IntervalBounds bounds(terms, IntervalClasses(p), /*track_choices=*/true);
    OpEmitter emitter(p.num_layers());
    EmitInterval(terms, 0, p.num_layers(), 0,
                 [&](int s, int t, int64_t) { return bounds.LowestPeakChoice(s, t); }, &emitter);
    Result<SimulationResult> sim = Simulate(p, AddFrees(emitter.Finish(), p.num_layers()));
    ASSERT_TRUE(sim.ok());
    EXPECT_EQ(sim->activation_peak_bytes, bounds.floor(0, p.num_layers())) << p.model;
  }
}

}  // namespace
}  // namespace remat::solver
