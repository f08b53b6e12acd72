// RunInOrder: every task once, results in the tasks' order, at most the
// threads asked for running at once.
#include "planning/in_order.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace remat::planning_internal {
namespace {

TEST(RunInOrder, ResultsInTheTasksOrderOnAnyNumberOfThreads) {
  for (size_t threads : {0, 1, 2, 3, 8, 200}) {
    std::atomic<int> runs{0};
    std::vector<std::function<int()>> tasks;
    for (int i = 0; i < 100; ++i) {
      tasks.push_back([i, &runs] {
        ++runs;
        // Later tasks finish first where they run side by side.
        std::this_thread::sleep_for(std::chrono::microseconds((100 - i) * 5));
        return i * i;
      });
    }
    const std::vector<int> out = RunInOrder(tasks, threads);
    ASSERT_EQ(out.size(), 100u) << threads << " threads";
    EXPECT_EQ(runs.load(), 100) << threads << " threads";
    for (int i = 0; i < 100; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], i * i) << threads;
  }
}

TEST(RunInOrder, AtMostTheThreadsAskedForRunAtOnce) {
  for (size_t threads : {1, 2, 4}) {
    std::atomic<int> running{0}, most{0};
    std::vector<std::function<int()>> tasks(24, [&] {
      const int now = ++running;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --running;
      return 0;
    });
    RunInOrder(tasks, threads);
    EXPECT_LE(most.load(), static_cast<int>(threads));
    EXPECT_GE(most.load(), 1);
  }
}

TEST(RunInOrder, ATasksExceptionIsThrownToTheCaller) {
  for (size_t threads : {1, 2, 4}) {
    std::atomic<int> runs{0};
    std::vector<std::function<int()>> tasks;
    for (int i = 0; i < 50; ++i) {
      tasks.push_back([i, &runs]() -> int {
        ++runs;
        if (i == 3) throw std::runtime_error("task 3 failed");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return i;
      });
    }
    try {
      RunInOrder(tasks, threads);
      ADD_FAILURE() << "no exception on " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "task 3 failed");
    }
    // On one thread no task starts after the one that threw (on more, those
    // running then may take another before they see it).
    if (threads == 1) EXPECT_EQ(runs.load(), 4);
  }
}

TEST(RunInOrder, ATasksOwnTasksRunOnItsThread) {
  // Two outer tasks, each running four inner ones: the inner ones run on
  // the outer task's thread, in order, and the flag is cleared after.
  std::vector<std::function<std::vector<bool>()>> outer;
  for (int o = 0; o < 2; ++o) {
    outer.push_back([] {
      const std::thread::id self = std::this_thread::get_id();
      std::vector<std::function<bool()>> inner;
      for (int i = 0; i < 4; ++i) {
        inner.push_back([self] { return std::this_thread::get_id() == self; });
      }
      return RunInOrder(inner, 4);
    });
  }
  for (const std::vector<bool>& same : RunInOrder(outer, 2)) {
    EXPECT_EQ(same, std::vector<bool>(4, true));
  }
  EXPECT_FALSE(InRunInOrderTask());
}

TEST(RunInOrder, NoTasksNoResults) {
  EXPECT_TRUE(RunInOrder(std::vector<std::function<int()>>{}, 4).empty());
}

}  // namespace
}  // namespace remat::planning_internal
