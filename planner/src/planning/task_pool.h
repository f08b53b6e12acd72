// Tasks on a few threads, where a task may queue more: those that wait for
// its result (the Pareto sweep's budgets, known once every strategy's
// lowest peak is). Internal to the planning layer.
#ifndef REMAT_SRC_PLANNING_TASK_POOL_H_
#define REMAT_SRC_PLANNING_TASK_POOL_H_

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "planning/in_order.h"

namespace remat::planning_internal {

// Runs queued tasks, at most `threads` at a time (the thread calling Run
// and threads - 1 more), each thread taking the queued task of the highest
// rank, of those the one queued first. A running task may queue more; Run
// returns when none is queued or running. Where a task throws, no task
// starts after it, the running ones finish, and the exception (the first
// caught) is thrown by Run. Tasks run as RunInOrder's do (InRunInOrderTask
// holds), so a RunInOrder inside one runs on its thread alone; called from
// a task of RunInOrder, the pool runs its tasks on the calling thread
// alone. Another thread may join in while Run runs (Help), and Cancel
// drops the tasks queued. Not copyable; Run once.
class TaskPool {
 public:
  // `threads` 0 counts as 1.
  explicit TaskPool(size_t threads)
      : threads_(InRunInOrderTask() ? 1 : std::max<size_t>(threads, 1)) {}
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Queues `task` (safe from any thread, a running task's included).
  void Add(int rank, std::function<void()> task) {
    const std::lock_guard<std::mutex> lock(mu_);
    if (failed_ || cancelled_) return;
    queued_.emplace(std::make_pair(-rank, next_++), std::move(task));
    changed_.notify_one();
  }

  // Takes tasks as Run's threads do, until none is queued or running;
  // returns at once where none is. The pool must outlive the call.
  void Help() { Work(); }

  // Drops the tasks queued and those queued later; the running ones finish.
  void Cancel() {
    const std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    queued_.clear();
    changed_.notify_all();
  }

  void Run() {
    std::vector<std::thread> more;
    for (size_t i = 1; i < threads_; ++i) {
      try {
        more.emplace_back([this] { Work(); });
      } catch (const std::system_error&) {
        break;  // the threads started share the tasks
      }
    }
    Work();
    for (std::thread& t : more) t.join();
    if (failed_) std::rethrow_exception(failed_);
  }

 private:
  void Work() {
    const bool was_in_task = InRunInOrderTask();
    InRunInOrderTask() = true;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      changed_.wait(lock, [this] { return !queued_.empty() || running_ == 0; });
      if (queued_.empty()) break;  // and none running: none will be queued
      std::function<void()> task = std::move(queued_.begin()->second);
      queued_.erase(queued_.begin());
      ++running_;
      lock.unlock();
      std::exception_ptr thrown;
      try {
        task();
      } catch (...) {
        thrown = std::current_exception();
      }
      task = nullptr;
      lock.lock();
      --running_;
      if (thrown && !failed_) {
        failed_ = thrown;
        queued_.clear();
      }
      changed_.notify_all();
    }
    InRunInOrderTask() = was_in_task;
  }

  const size_t threads_;
  std::mutex mu_;
  std::condition_variable changed_;
  // By (minus the rank, order queued): the first is taken next.
  std::map<std::pair<int, uint64_t>, std::function<void()>> queued_;
  uint64_t next_ = 0;
  size_t running_ = 0;
  std::exception_ptr failed_;
  bool cancelled_ = false;
};

}  // namespace remat::planning_internal

#endif  // REMAT_SRC_PLANNING_TASK_POOL_H_
