// A replay's allocator requests (simulate/alloc_requests.h): the ids, the
// tally without an allocator model (reserved == live), and the events, a
// request the profile knows as tensors recorded tensor by tensor.
#include "simulate/alloc_requests.h"

#include <gtest/gtest.h>

#include <vector>

namespace remat::simulate_internal {
namespace {

// Two layers: the tensor ids x, a, g (3 each, 0..8), then the skips, the
// skips' gradients and the gradient sets (2 each), the model-state parts
// (3), the workspace; a request's j-th tensor is recorded under its id plus
// j times 19.
constexpr int kLayers = 2;
constexpr int64_t kIds = 19;

bool Same(const AllocEvent& a, const AllocEvent& b) {
  return a.kind == b.kind && a.id == b.id && a.size_bytes == b.size_bytes;
}

TEST(Requests, IdsFollowTheTensorsInTheirOrder) {
  const Requests requests(kLayers, nullptr, nullptr);
  EXPECT_EQ(requests.SkipId(0), 9);
  EXPECT_EQ(requests.SkipGradId(1), 12);
  EXPECT_EQ(requests.GradientsId(0), 13);
  EXPECT_EQ(requests.ModelStateId(2), 17);
  EXPECT_EQ(requests.WorkspaceId(), 18);
  EXPECT_EQ(requests.InFlightId(), 19);
}

TEST(Requests, ARequestOfTensorsIsRecordedTensorByTensorAndFreedLastFirst) {
  std::vector<AllocEvent> events;
  Requests requests(kLayers, nullptr, &events);
  const TensorSizes tensors = {10, 20};
  requests.Add(0, 100);
  requests.Add(1, 30, &tensors);
  requests.Add(2, 0);  // empty: nothing recorded
  EXPECT_EQ(requests.reserved(), 130);
  requests.Remove(1, 30);
  requests.Remove(2, 0);
  EXPECT_EQ(requests.reserved(), 100);
  const std::vector<AllocEvent> expected = {AllocEvent::Alloc(0, 100), AllocEvent::Alloc(1, 10),
                                            AllocEvent::Alloc(1 + kIds, 20),
                                            AllocEvent::Free(1 + kIds), AllocEvent::Free(1)};
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_TRUE(Same(events[i], expected[i])) << i;
}

TEST(Requests, TheWorkspaceIsAllocatedAndFreedAtTheOpsPeak) {
  std::vector<AllocEvent> events;
  Requests requests(kLayers, nullptr, &events);
  requests.Add(0, 100);
  // Without an allocator model, bytes released before the peak leave the tally.
  EXPECT_EQ(requests.ReservedWithWorkspace(50, 40, nullptr, 0), 110);
  EXPECT_EQ(requests.reserved(), 100);
  const TensorSizes tensors = {20};
  EXPECT_EQ(requests.ReservedWithWorkspace(25, 0, &tensors, 5), 125);
  const std::vector<AllocEvent> expected = {
      AllocEvent::Alloc(0, 100), AllocEvent::Alloc(18, 50),       AllocEvent::Free(18),
      AllocEvent::Alloc(18, 20), AllocEvent::Alloc(18 + kIds, 5), AllocEvent::Free(18 + kIds),
      AllocEvent::Free(18)};
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_TRUE(Same(events[i], expected[i])) << i;
}

}  // namespace
}  // namespace remat::simulate_internal
