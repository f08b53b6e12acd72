// Deriving the layer chain from an op graph (Boost.Graph).
#include <gtest/gtest.h>

#include "analytic/chain.h"
#include "analytic/op_graph.h"

namespace remat {
namespace {

using analytic::DeriveChain;
using analytic::OpGraph;
using analytic::OpInfo;
using analytic::OpTimeModel;

OpInfo MakeOp(const std::string& name, const std::string& layer, std::vector<int> in,
              std::vector<int> out, std::vector<int> saved) {
  OpInfo op;
  op.name = name;
  op.layer = layer;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.saved = std::move(saved);
  op.forward_flops = 1e3;
  op.backward_flops = 2e3;
  return op;
}

// Two residual layers: y = x + f(x). The residual edge (x consumed twice)
// stays inside a layer, so the boundary carries one tensor.
TEST(ChainDerivation, ResidualLayersFormAChain) {
  OpGraph g;
  const int x0 = g.AddTensor("x0", 100);
  const int h1 = g.AddTensor("h1", 400), y1 = g.AddTensor("y1", 100);
  const int h2 = g.AddTensor("h2", 400), y2 = g.AddTensor("y2", 100);
  g.AddOp(MakeOp("f1", "L1", {x0}, {h1}, {x0}));
  g.AddOp(MakeOp("add1", "L1", {x0, h1}, {y1}, {}));
  g.AddOp(MakeOp("f2", "L2", {y1}, {h2}, {y1, h2}));
  g.AddOp(MakeOp("add2", "L2", {y1, h2}, {y2}, {}));
  Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{1e3, 1e3}, {{"L1", "block"}});
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  ASSERT_EQ(chain->size(), 2u);
  EXPECT_EQ((*chain)[0].name, "L1");
  EXPECT_EQ((*chain)[0].kind, "block");
  EXPECT_EQ((*chain)[0].input_bytes, 100);
  EXPECT_EQ((*chain)[0].output_bytes, 100);
  // L1 saves x0 (its input, counted by whoever produced it) and keeps y1: 100.
  EXPECT_EQ((*chain)[0].activation_bytes, 100);
  // While L1 runs, h1 (400) is transient: workspace 400 on top of what it keeps.
  EXPECT_EQ((*chain)[0].forward_workspace_bytes, 400);
  // L2 saves y1 (L1's output: not counted again), h2 and its output y2.
  EXPECT_EQ((*chain)[1].activation_bytes, 500);
  EXPECT_DOUBLE_EQ((*chain)[1].forward_ms, 2.0);
  EXPECT_DOUBLE_EQ((*chain)[1].backward_ms, 4.0);
}

// Backward: autograd frees what an op saved once the op's backward has run.
// x -> f -> h (saved by g) -> g -> s (saved by k) -> k -> y. k's backward
// allocates s's gradient (400) with s still saved: +400; it frees s (-400);
// g allocates h's gradient (400) with h still saved: peak 400 above the
// start, not the 800 of keeping every saved tensor to the end.
TEST(ChainDerivation, BackwardReleasesWhatEachOpSaved) {
  OpGraph g;
  const int x = g.AddTensor("x", 100), h = g.AddTensor("h", 400), s = g.AddTensor("s", 400),
            y = g.AddTensor("y", 100);
  g.AddOp(MakeOp("f", "L1", {x}, {h}, {}));
  g.AddOp(MakeOp("g", "L1", {h}, {s}, {h}));
  g.AddOp(MakeOp("k", "L1", {s}, {y}, {s}));
  Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{1e3, 1e3}, {});
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  ASSERT_EQ(chain->size(), 1u);
  EXPECT_EQ((*chain)[0].activation_bytes, 900);  // h, s and the output y
  // k: +400 (ds) = 400; frees s: 0. g: +400 (dh) = 400; frees ds and h: -400.
  // f: +100 (dx) = -300. Peak 400; minus the input gradient handed on (100).
  EXPECT_EQ((*chain)[0].backward_workspace_bytes, 300);
}

TEST(ChainDerivation, ATensorSkippingALayerIsNotAChain) {
  OpGraph g;
  const int x0 = g.AddTensor("x0", 10), a = g.AddTensor("a", 10), b = g.AddTensor("b", 10),
            c = g.AddTensor("c", 10);
  g.AddOp(MakeOp("f", "L1", {x0}, {a}, {}));
  g.AddOp(MakeOp("g", "L2", {a}, {b}, {}));
  g.AddOp(MakeOp("h", "L3", {b, a}, {c}, {}));  // reads L1's output past L2
  Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{}, {});
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.status().message().find("L3"), std::string::npos) << chain.status().message();
}

}  // namespace
}  // namespace remat
