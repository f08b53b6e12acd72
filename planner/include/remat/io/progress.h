// Progress of long operations (a Pareto sweep, measuring a profile, training
// steps), reported to whoever shows it: the CLI draws a bar on a terminal or
// prints a line now and then; a library caller may log it or do nothing.
// Torch-free, so the planner and the runtime API share it.
#ifndef REMAT_PROGRESS_H_
#define REMAT_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <string>

namespace remat {

// Where a long operation stands.
struct ProgressUpdate {
  std::string what;   // the operation: "pareto sweep", "profiling", "training"
  int64_t done = 0;   // items finished, 0..total
  int64_t total = 0;  // items in all (> 0)
  std::string item;   // the item now running or just finished: "block3", "step 4"; may be empty
};

// Receives updates. An operation calls it once with done == 0 before its
// first item, after each item, and last with done == total; an operation
// that fails stops calling it (the receiver may never see done == total).
// Called on the operation's thread; it must not throw. Empty: no progress
// is reported (the default everywhere).
using ProgressCallback = std::function<void(const ProgressUpdate&)>;

// Calls `progress`, if set, with {what, done, total, item}.
inline void ReportProgress(const ProgressCallback& progress, const std::string& what, int64_t done,
                           int64_t total, const std::string& item = "") {
  if (progress) progress(ProgressUpdate{what, done, total, item});
}

}  // namespace remat

#endif  // REMAT_PROGRESS_H_
