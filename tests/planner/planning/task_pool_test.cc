// TaskPool: every task queued runs once, those tasks queue included, the
// highest rank first, at most the threads asked for at once.
#include "planning/task_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace remat::planning_internal {
namespace {

TEST(TaskPool, TasksQueuedByTasksRunToo) {
  for (size_t threads : {0, 1, 2, 4}) {
    TaskPool pool(threads);
    std::atomic<int> runs{0};
    // A tree: each of 4 roots queues 3 children, each child 2 leaves.
    for (int root = 0; root < 4; ++root) {
      pool.Add(0, [&] {
        ++runs;
        for (int child = 0; child < 3; ++child) {
          pool.Add(1, [&] {
            ++runs;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            for (int leaf = 0; leaf < 2; ++leaf) pool.Add(2, [&] { ++runs; });
          });
        }
      });
    }
    pool.Run();
    EXPECT_EQ(runs.load(), 4 + 12 + 24) << threads << " threads";
  }
}

TEST(TaskPool, OneThreadTakesTheHighestRankFirstThenTheFirstQueued) {
  TaskPool pool(1);
  std::vector<int> order;
  pool.Add(1, [&] { order.push_back(10); });
  pool.Add(3, [&] {
    order.push_back(30);
    pool.Add(2, [&] { order.push_back(20); });
    pool.Add(5, [&] { order.push_back(50); });
  });
  pool.Add(1, [&] { order.push_back(11); });
  pool.Add(3, [&] { order.push_back(31); });
  pool.Run();
  EXPECT_EQ(order, (std::vector<int>{30, 50, 31, 20, 10, 11}));
}

TEST(TaskPool, AtMostTheThreadsAskedForRunAtOnce) {
  for (size_t threads : {1, 2, 3}) {
    TaskPool pool(threads);
    std::atomic<int> running{0}, most{0};
    std::function<void(int)> task = [&](int depth) {
      const int now = ++running;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (depth < 2) {
        for (int i = 0; i < 3; ++i) pool.Add(0, [&task, depth] { task(depth + 1); });
      }
      --running;
    };
    for (int i = 0; i < 3; ++i) pool.Add(0, [&task] { task(0); });
    pool.Run();
    EXPECT_LE(most.load(), static_cast<int>(threads));
    EXPECT_GE(most.load(), 1);
  }
}

TEST(TaskPool, ATasksExceptionIsThrownAndNoTaskStartsAfterIt) {
  TaskPool pool(1);
  std::atomic<int> runs{0};
  for (int i = 0; i < 10; ++i) {
    pool.Add(0, [&, i] {
      ++runs;
      if (i == 3) {
        pool.Add(9, [&] { ++runs; });  // queued before the throw: dropped
        throw std::runtime_error("task 3 failed");
      }
    });
  }
  try {
    pool.Run();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task 3 failed");
  }
  EXPECT_EQ(runs.load(), 4);
}

TEST(TaskPool, RunInOrderInsideATaskRunsOnItsThread) {
  TaskPool pool(2);
  std::mutex mu;
  std::vector<bool> same;
  for (int t = 0; t < 2; ++t) {
    pool.Add(0, [&] {
      const std::thread::id self = std::this_thread::get_id();
      std::vector<std::function<bool()>> inner(
          4, [self] { return std::this_thread::get_id() == self; });
      const std::vector<bool> out = RunInOrder(inner, 4);
      const std::lock_guard<std::mutex> lock(mu);
      same.insert(same.end(), out.begin(), out.end());
    });
  }
  pool.Run();
  EXPECT_EQ(same, std::vector<bool>(8, true));
  EXPECT_FALSE(InRunInOrderTask());
}

}  // namespace
}  // namespace remat::planning_internal
