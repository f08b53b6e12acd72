// Independent tasks run on a few threads, their results kept in the tasks'
// order (the fit advice's alternatives). Internal to the planning layer.
#ifndef REMAT_SRC_PLANNING_IN_ORDER_H_
#define REMAT_SRC_PLANNING_IN_ORDER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace remat::planning_internal {

// The threads RunInOrder uses by default: the machine's cores, 1 to 16.
inline size_t MachineThreads() {
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
}

// Whether this thread runs a task of RunInOrder.
inline bool& InRunInOrderTask() {
  thread_local bool in_task = false;
  return in_task;
}

// Runs every task once, at most `threads` at a time (this thread and
// threads - 1 more, each taking the next task not yet started), and returns
// their results in the tasks' order, whatever the order they ran in. So
// memory held by a running task is held by `threads` tasks at most, not by
// all of them at once. Where a task throws, no task starts after it, the
// running ones finish, and the exception (the first caught, where several
// throw) is thrown here; where the system has no thread to give, fewer run.
// The tasks must be safe to run concurrently with each other; `threads` 0
// counts as 1. Called from a task of another RunInOrder, it runs its tasks
// on the calling thread alone: the outer one already keeps the cores busy.
template <typename T>
std::vector<T> RunInOrder(const std::vector<std::function<T()>>& tasks, size_t threads) {
  if (InRunInOrderTask()) threads = 1;
  std::vector<T> results(tasks.size());
  std::atomic<size_t> next{0};
  std::mutex failing;
  std::exception_ptr failed;
  auto work = [&] {
    const bool was_in_task = InRunInOrderTask();
    InRunInOrderTask() = true;
    for (size_t i = next++; i < tasks.size(); i = next++) {
      try {
        results[i] = tasks[i]();
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failing);
        if (!failed) failed = std::current_exception();
        next = tasks.size();
      }
    }
    InRunInOrderTask() = was_in_task;
  };
  std::vector<std::thread> more;
  const size_t n = std::min(std::max<size_t>(threads, 1), std::max<size_t>(tasks.size(), 1));
  for (size_t i = 1; i < n; ++i) {
    try {
      more.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // the threads started share the tasks
    }
  }
  work();
  for (std::thread& t : more) t.join();
  if (failed) std::rethrow_exception(failed);
  return results;
}

}  // namespace remat::planning_internal

#endif  // REMAT_SRC_PLANNING_IN_ORDER_H_
