// Progress of long commands on standard error: a live bar when stderr is a
// terminal, a plain line now and then otherwise, nothing with --quiet.
// Standard output is never touched, so `--json` stays clean.
#ifndef REMAT_CLI_PROGRESS_BAR_H_
#define REMAT_CLI_PROGRESS_BAR_H_

#include <functional>
#include <iosfwd>
#include <string>

#include "args.h"
#include "remat/io/progress.h"

namespace remat::cli {

enum class ProgressStyle {
  kOff,    // nothing (--quiet; the default of an Environment, so tests and fuzzers see none)
  kLines,  // "planner: profiling 7/16 (43%) block5, 12s left", rate-limited (a log, a pipe)
  kBar,    // one line redrawn in place with \r (a terminal)
};

struct ProgressBarOptions {
  ProgressStyle style = ProgressStyle::kOff;
  // Now, in seconds, on a monotonic clock; empty: std::chrono::steady_clock.
  std::function<double()> clock;
  // Nothing is shown until an operation has run this long: quick commands
  // stay silent.
  double delay_s = 1.0;
  // kLines: a line at most every `line_interval_s`, and only once another
  // `line_step` of the total is done; the last line when the operation ends.
  double line_interval_s = 1.0;
  double line_step = 0.1;
  // kBar: redrawn at most this often, `width` columns wide (the line is cut
  // to width - 1 so that it never wraps).
  double redraw_interval_s = 0.1;
  int width = 80;
};

// Renders ProgressUpdates of one operation after another on `err`. A new
// operation starts when `what` changes or `done` goes down. Not thread-safe:
// updates come from the thread running the operation. Does not own `err`,
// which must outlive it.
class ProgressBar {
 public:
  ProgressBar(std::ostream& err, ProgressBarOptions options);
  ~ProgressBar();  // Finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Update(const ProgressUpdate& update);
  // A callback that calls Update; empty when the style is kOff, so that
  // operations skip building updates. The bar must outlive its use.
  ProgressCallback Callback();
  // kBar: erases the bar, so that something else can be printed to the same
  // terminal; the next update draws it again. Otherwise nothing.
  void Clear();
  // Ends the current operation (one that failed sends no final update):
  // erases the bar; prints nothing more.
  void Finish();

 private:
  double Now() const;
  void Start(const ProgressUpdate& update, double now);
  void Lines(const ProgressUpdate& update, double now);
  void Bar(const ProgressUpdate& update, double now);

  std::ostream& err_;
  ProgressBarOptions options_;
  bool active_ = false;  // an operation is under way
  std::string what_;
  int64_t last_done_ = 0;
  double start_ = 0;
  double last_shown_ = 0;     // when a line or the bar was last printed
  double last_fraction_ = 0;  // kLines: the fraction of the last line
  bool shown_ = false;        // something of this operation was printed
  bool drawn_ = false;        // kBar: the bar is on the terminal now
};

// Seconds left at the rate so far: elapsed / done * (total - done); negative
// when unknown (nothing done yet).
double SecondsLeft(int64_t done, int64_t total, double elapsed_s);
// "0s", "42s", "3m05s", "1h02m".
std::string FormatDuration(double seconds);
// The text of the bar, at most `width` - 1 columns (the item is shortened
// first): "profiling [=========>         ] 7/16  43% block5  12s left".
std::string BarText(const ProgressUpdate& update, double elapsed_s, int width);
// A plain line without newline: "planner: profiling 7/16 (43%) block5, 12s left".
std::string ProgressLine(const ProgressUpdate& update, double elapsed_s);

// What `planner` shows on descriptor `fd` (standard error): a bar as wide as
// the terminal when it is one (and TERM is not "dumb"), lines otherwise.
ProgressBarOptions ProgressOptionsFor(int fd);

// --quiet, for every command with long operations.
FlagSpec QuietFlag();
// `base` (the environment's), or kOff when --quiet is given.
ProgressBarOptions WithQuiet(ProgressBarOptions base, const Args& args);

}  // namespace remat::cli

#endif  // REMAT_CLI_PROGRESS_BAR_H_
