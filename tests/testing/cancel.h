// A DP solve with a cancel flag (MultiLevelDp, SingleLevelOffloadDp): never
// set, the same value as a solve without one; set before the fill, no
// solution and cancelled(); set from another thread during the fill, either
// finished with the same value or stopped with nothing.
#ifndef REMAT_TESTS_TESTING_CANCEL_H_
#define REMAT_TESTS_TESTING_CANCEL_H_

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

namespace remat::testing {

// `options` without a cancel flag; Dp(terms, options).Solve(nullptr) must
// find a solution.
template <typename Dp, typename Terms, typename Options>
void ExpectCancelStopsTheSolve(const Terms& terms, Options options) {
  const auto plain = Dp(terms, options).Solve(nullptr);
  ASSERT_TRUE(plain.has_value());
  std::atomic<bool> cancel{false};
  options.cancel = &cancel;
  Dp watched(terms, options);
  const auto same = watched.Solve(nullptr);
  ASSERT_TRUE(same.has_value());
  EXPECT_FALSE(watched.cancelled());
  EXPECT_EQ(same->recompute_ms, plain->recompute_ms);
  cancel = true;
  Dp stopped(terms, options);
  EXPECT_FALSE(stopped.Solve(nullptr).has_value());
  EXPECT_TRUE(stopped.cancelled());
  cancel = false;
  Dp raced(terms, options);
  std::thread canceller([&] { cancel = true; });
  const auto maybe = raced.Solve(nullptr);
  canceller.join();
  EXPECT_EQ(maybe.has_value(), !raced.cancelled());
  if (maybe) {
    EXPECT_EQ(maybe->recompute_ms, plain->recompute_ms);
  }
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_CANCEL_H_
