#include "remat/simulate/graph_simulator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "remat/schedule/decisions.h"
#include "testing/brute_force.h"
#include "testing/graphs.h"

namespace remat {
namespace {

Schedule KeepAll(const Profile& p) {
  Result<Schedule> s = BuildSingleLevelSchedule(
      p, std::vector<LayerDecision>(p.num_layers(), LayerDecision::kKeep), {});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : Schedule{};
}

Schedule FromDecisions(const Profile& p, const testing::SimulatedDecisions& d) {
  Result<Schedule> s = BuildSingleLevelSchedule(p, d.decisions, d.selective_option);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : Schedule{};
}

LayerProfile Layer(const char* name, int64_t in, int64_t out, int64_t kept) {
  LayerProfile l;
  l.name = name;
  l.kind = "block";
  l.input_bytes = in;
  l.output_bytes = out;
  l.activation_bytes = kept;
  l.forward_ms = 1;
  l.backward_ms = 2;
  return l;
}

// A vision tower spliced into a language model's first layer is one chain:
// the graph's step, with every single-level plan of each chain, peaks at
// the bytes and takes the time of that chain's step under the plans joined.
TEST(GraphSimulator, SpliceGraphEqualsItsSingleChain) {
  for (uint32_t seed : {1u, 5u, 9u, 13u}) {
    const GraphProfile g = testing::SpliceGraph(3, 3, seed);
    const Profile chain = testing::SpliceChain(g);
    const auto vision_plans = testing::AllSingleLevelPlans(g.chains[0].profile);
    const auto lm_plans = testing::AllSingleLevelPlans(g.chains[1].profile);
    ASSERT_GT(vision_plans.size(), 4u);
    int compared = 0;
    for (const auto& v : vision_plans) {
      for (const auto& t : lm_plans) {
        const std::vector<Schedule> schedules = {FromDecisions(g.chains[0].profile, v),
                                                 FromDecisions(g.chains[1].profile, t)};
        Result<GraphSimulationResult> graph = SimulateGraph(g, schedules);
        ASSERT_TRUE(graph.ok()) << graph.status().message();
        testing::SimulatedDecisions joined = v;
        joined.decisions.insert(joined.decisions.end(), t.decisions.begin(), t.decisions.end());
        joined.selective_option.insert(joined.selective_option.end(), t.selective_option.begin(),
                                       t.selective_option.end());
        Result<SimulationResult> single = Simulate(chain, FromDecisions(chain, joined));
        ASSERT_TRUE(single.ok()) << single.status().message();
        EXPECT_EQ(graph->peak_bytes, single->peak_bytes)
            << "seed " << seed << ", plan " << compared;
        EXPECT_EQ(graph->static_bytes, single->static_bytes);
        // Sums of the same times in another order: a few ulps of the step.
        EXPECT_NEAR(graph->step_ms, single->step_ms, 1e-12 * single->step_ms);
        ++compared;
      }
    }
    EXPECT_EQ(compared, static_cast<int>(vision_plans.size() * lm_plans.size()));
  }
}

// The encoder's output (100 bytes) is read by two decoder layers: the
// first of them in backward makes its gradient, the second makes its part
// as a transient and adds it, and the output is freed after that reader.
TEST(GraphSimulator, CrossAttentionHoldsOutputAndAccumulatesGradient) {
  Profile encoder;
  encoder.model = "encoder";
  encoder.layers = {Layer("e0", 10, 100, 100)};
  Profile decoder;
  decoder.model = "decoder";
  decoder.layers = {Layer("d0", 4, 20, 20), Layer("d1", 20, 20, 30), Layer("d2", 20, 1, 1)};
  const GraphProfile g =
      testing::MakeGraph({{"encoder", encoder}, {"decoder", decoder}}, {GraphEdge{0, 1, {0, 1}}});
  const std::vector<Schedule> schedules = {KeepAll(encoder), KeepAll(decoder)};
  Result<GraphSimulationResult> r = SimulateGraph(g, schedules);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Before d0's backward: the encoder's input (10) and output (100), the
  // decoder's input (4) and g[1] (20), the output's gradient (100); at its
  // peak the second part of that gradient (100) besides.
  EXPECT_EQ(r->peak_bytes, 10 + 100 + 4 + 20 + 100 + 100);
  EXPECT_EQ(r->peak_chain, 1);
  const Op& at_peak = schedules[1].ops[r->peak_op];
  EXPECT_EQ(at_peak.kind, OpKind::kBackward);
  EXPECT_EQ(at_peak.layer, 0);
  // After the decoder's backward the output is freed, its gradient held for
  // the encoder's backward with the encoder's input; after that nothing is
  // left.
  const GraphPoint* decoder_done = nullptr;
  for (const GraphPoint& p : r->timeline) {
    if (p.chain == 1) decoder_done = &p;
  }
  ASSERT_NE(decoder_done, nullptr);
  EXPECT_EQ(decoder_done->live_after, 10 + 100);
  EXPECT_EQ(r->timeline.back().live_after, 0);
  EXPECT_EQ(r->timeline.back().chain, -1);  // the optimizer step closes the step
  EXPECT_DOUBLE_EQ(r->step_ms, 3 * (1 + 2) + (1 + 2));
}

// Forwards run in the graph's order and backwards in reverse, whatever the
// file's chain order.
TEST(GraphSimulator, RunsChainsInTheGraphsOrder) {
  GraphProfile forward_listed = testing::EncoderDecoderGraph(3, 4, 3);
  GraphProfile reverse_listed =
      testing::MakeGraph({{"decoder", forward_listed.chains[1].profile},
                          {"encoder", forward_listed.chains[0].profile}},
                         {GraphEdge{1, 0, forward_listed.edges[0].readers}});
  EXPECT_EQ(reverse_listed.order, (std::vector<int>{1, 0}));
  Result<GraphSimulationResult> a = SimulateGraph(
      forward_listed,
      {KeepAll(forward_listed.chains[0].profile), KeepAll(forward_listed.chains[1].profile)});
  Result<GraphSimulationResult> b = SimulateGraph(
      reverse_listed,
      {KeepAll(reverse_listed.chains[0].profile), KeepAll(reverse_listed.chains[1].profile)});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->peak_bytes, b->peak_bytes);
  ASSERT_EQ(a->timeline.size(), b->timeline.size());
  EXPECT_EQ(b->timeline.front().chain, 1);  // the encoder, listed second, runs first
}

TEST(GraphSimulator, RejectsAScheduleCountThatDiffersFromTheChains) {
  const GraphProfile g = testing::EncoderDecoderGraph(2, 3, 1);
  Result<GraphSimulationResult> r = SimulateGraph(g, {KeepAll(g.chains[0].profile)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status().message().find("1 chain schedules for 2 chains"), std::string::npos);
}

}  // namespace
}  // namespace remat
