// A layer's backward replayed with tensor liveness (analytic/backward_workspace.h),
// on a two-op layer whose figures follow by hand.
#include "analytic/backward_workspace.h"

#include <gtest/gtest.h>

namespace remat::analytic {
namespace {

// x (100 B) -> op1 -> h (200 B) -> op2 -> y (300 B). op1 saves x (the
// layer's input, held by the executor) and computes 50 B of parameter
// gradients with a 150 B backward workspace; op2 saves h.
class BackwardWorkspaceTest : public ::testing::Test {
 protected:
  BackwardWorkspaceTest() {
    x_ = g_.AddTensor("x", 100);
    const int h = g_.AddTensor("h", 200);
    y_ = g_.AddTensor("y", 300);
    OpInfo op1;
    op1.name = "op1";
    op1.layer = "block";
    op1.inputs = {x_};
    op1.outputs = {h};
    op1.saved = {x_};
    op1.backward_workspace = 150;
    op1.gradient_bytes = 50;
    ops_.push_back(g_.AddOp(op1));
    OpInfo op2;
    op2.name = "op2";
    op2.layer = "block";
    op2.inputs = {h};
    op2.outputs = {y_};
    op2.saved = {h};
    ops_.push_back(g_.AddOp(op2));
  }

  int64_t Run(const BackwardRun& run, TensorSizes* at_peak) {
    return BackwardWorkspace(g_, ops_, x_, y_, side_inputs_, run).Run(at_peak);
  }

  OpGraph g_;
  std::vector<int> ops_;
  std::set<int> side_inputs_;
  int x_ = -1, y_ = -1;
};

// op2's backward makes h's gradient (200) and lets the saved h go (200 of
// the layer's state); op1's adds x's gradient (100) and its transients
// (workspace 150, gradient 50) beside h's gradient: 300 above the state at
// the backward's start, less the input's gradient the layer hands on (100).
// At the peak: the live gradients but the input's, then the transients.
TEST_F(BackwardWorkspaceTest, AddingIntoGradientsPeaksAtTheOpWithTheTransients) {
  TensorSizes at_peak;
  EXPECT_EQ(Run(BackwardRun{}, &at_peak), 200);
  EXPECT_EQ(at_peak, (TensorSizes{200, 150, 50}));
}

// Creating the gradients: the 50 B stay as .grad (counted apart, not in
// the workspace: 300 - 100 - 50), the op's transient is its workspace alone.
TEST_F(BackwardWorkspaceTest, CreatedGradientsAreNotWorkspace) {
  BackwardRun creating;
  creating.creates_gradients = true;
  TensorSizes at_peak;
  EXPECT_EQ(Run(creating, &at_peak), 150);
  EXPECT_EQ(at_peak, (TensorSizes{200, 150}));
  EXPECT_EQ(Run(creating, nullptr), 150);
}

// x (100 B) -> op1 -> h (20 B) -> op2 -> y; op2 saves h and a 400 B
// tensor m op1 made, op1 creates 300 B of parameter gradients. op2's
// backward holds h's gradient (20 B: the peak) and frees h and m (420 B);
// op1's adds x's gradient (100) and its parameters' (300), 20 B fewer than
// were freed. The simulator counts the input's and the parameters'
// gradients whole at the layer's backward: the peak is 380 B below them.
TEST(BackwardWorkspace, FreedSavedTensorsLeaveThePeakBelowTheGradientsMade) {
  OpGraph g;
  const int x = g.AddTensor("x", 100);
  const int h = g.AddTensor("h", 20);
  const int m = g.AddTensor("m", 400, false);
  const int y = g.AddTensor("y", 300);
  OpInfo op1;
  op1.name = "op1";
  op1.layer = "block";
  op1.inputs = {x};
  op1.outputs = {h, m};
  op1.saved = {x};
  op1.gradient_bytes = 300;
  OpInfo op2;
  op2.name = "op2";
  op2.layer = "block";
  op2.inputs = {h};
  op2.outputs = {y};
  op2.saved = {h, m};
  const std::vector<int> ops = {g.AddOp(op1), g.AddOp(op2)};
  const std::set<int> side_inputs;
  BackwardRun creating;
  creating.creates_gradients = true;
  EXPECT_EQ(BackwardWorkspace(g, ops, x, y, side_inputs, creating).Run(), 20 - 100 - 300);
}

}  // namespace
}  // namespace remat::analytic
