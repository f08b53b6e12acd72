#include "progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <utility>

namespace remat::cli {
namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();
// Clocks and fractions are doubles: 10 steps of 0.1 s make a second.
constexpr double kSlack = 1e-9;

double Fraction(int64_t done, int64_t total) {
  if (total <= 0) return 0;
  return std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
}

// Layer names come from input files: no control character reaches the terminal.
std::string Printable(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

// Whole percent done, rounded down (integers: 30/100 is 30%, not 29%).
int Percent(int64_t done, int64_t total) {
  if (total <= 0 || done <= 0) return 0;
  return done >= total ? 100 : static_cast<int>(done * 100 / total);
}

// "7/16  43%"
std::string Counts(const ProgressUpdate& u) {
  char pct[8];
  std::snprintf(pct, sizeof pct, "%3d%%", Percent(u.done, u.total));
  return std::to_string(u.done) + "/" + std::to_string(u.total) + " " + pct;
}

}  // namespace

double SecondsLeft(int64_t done, int64_t total, double elapsed_s) {
  if (done <= 0 || total <= 0) return -1;
  if (done >= total) return 0;
  return elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
}

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0)) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  if (s < 60) {
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  }
  return text;
}

std::string BarText(const ProgressUpdate& u, double elapsed_s, int width) {
  const size_t max_len = static_cast<size_t>(std::max(width, 20) - 1);
  const std::string what = Printable(u.what);
  const std::string counts = " " + Counts(u);
  const double left = SecondsLeft(u.done, u.total, elapsed_s);
  const std::string eta = left >= 0 ? "  " + FormatDuration(left) + " left" : "";
  // The bar takes what the text leaves, keeping ~30 columns for the item
  // ("optimal-single at 101.73 GiB"); its length holds still while the
  // counts and the time left change ("9/2449" .. "2449/2449", "  1h02m left").
  const size_t widest_counts = 2 * std::to_string(u.total).size() + 7;
  const long spare =
      static_cast<long>(max_len) - static_cast<long>(what.size() + 3 + widest_counts + 12 + 30);
  const int cells = static_cast<int>(std::clamp(spare, 10L, 30L));
  const int filled = static_cast<int>(Fraction(u.done, u.total) * cells);
  std::string bar = "[" + std::string(filled, '=');
  if (filled < cells) bar += ">" + std::string(cells - filled - 1, ' ');
  bar += "]";
  std::string text = what + " " + bar + counts;
  const std::string item = Printable(u.item);
  const long room = static_cast<long>(max_len) - static_cast<long>(text.size() + eta.size()) - 1;
  if (!item.empty() && room >= 4) {
    text +=
        " " + (item.size() <= static_cast<size_t>(room) ? item : item.substr(0, room - 3) + "...");
  }
  text += eta;
  if (text.size() > max_len) text.resize(max_len);
  return text;
}

std::string ProgressLine(const ProgressUpdate& u, double elapsed_s) {
  const std::string what = "planner: " + Printable(u.what) + " ";
  if (u.total > 0 && u.done >= u.total) {
    return what + "done: " + std::to_string(u.done) + "/" + std::to_string(u.total) + " in " +
           FormatDuration(elapsed_s);
  }
  std::string line = what + std::to_string(u.done) + "/" + std::to_string(u.total) + " (" +
                     std::to_string(Percent(u.done, u.total)) + "%)";
  if (!u.item.empty()) line += " " + Printable(u.item);
  const double left = SecondsLeft(u.done, u.total, elapsed_s);
  if (left >= 0) line += ", " + FormatDuration(left) + " left";
  return line;
}

ProgressBar::ProgressBar(std::ostream& err, ProgressBarOptions options)
    : err_(err), options_(std::move(options)) {}

ProgressBar::~ProgressBar() { Finish(); }

double ProgressBar::Now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressCallback ProgressBar::Callback() {
  if (options_.style == ProgressStyle::kOff) return {};
  return [this](const ProgressUpdate& u) { Update(u); };
}

void ProgressBar::Update(const ProgressUpdate& u) {
  if (options_.style == ProgressStyle::kOff) return;
  const double now = Now();
  if (!active_ || u.what != what_ || u.done < last_done_) Start(u, now);
  last_done_ = u.done;
  if (options_.style == ProgressStyle::kLines) {
    Lines(u, now);
  } else {
    Bar(u, now);
  }
  if (u.total > 0 && u.done >= u.total) Finish();
}

void ProgressBar::Start(const ProgressUpdate& u, double now) {
  Finish();
  active_ = true;
  what_ = u.what;
  start_ = now;
  last_shown_ = kNever;
  last_fraction_ = 0;
  shown_ = false;
}

void ProgressBar::Lines(const ProgressUpdate& u, double now) {
  const double elapsed = now - start_;
  const bool last = u.total > 0 && u.done >= u.total;
  if (last) {
    if (shown_) err_ << ProgressLine(u, elapsed) << "\n" << std::flush;
    return;
  }
  if (elapsed < options_.delay_s - kSlack) return;
  const double fraction = Fraction(u.done, u.total);
  if (shown_ && (now - last_shown_ < options_.line_interval_s - kSlack ||
                 fraction - last_fraction_ < options_.line_step - kSlack)) {
    return;
  }
  err_ << ProgressLine(u, elapsed) << "\n" << std::flush;
  shown_ = true;
  last_shown_ = now;
  last_fraction_ = fraction;
}

void ProgressBar::Bar(const ProgressUpdate& u, double now) {
  const double elapsed = now - start_;
  if ((u.total > 0 && u.done >= u.total) || elapsed < options_.delay_s - kSlack) return;
  if (drawn_ && now - last_shown_ < options_.redraw_interval_s - kSlack) return;
  err_ << '\r' << BarText(u, elapsed, options_.width) << "\033[K" << std::flush;
  drawn_ = shown_ = true;
  last_shown_ = now;
}

void ProgressBar::Clear() {
  if (!drawn_) return;
  err_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

void ProgressBar::Finish() {
  Clear();
  active_ = false;
}

ProgressBarOptions ProgressOptionsFor(int fd) {
  ProgressBarOptions o;
  const char* term = std::getenv("TERM");
  const bool terminal = ::isatty(fd) && !(term != nullptr && std::strcmp(term, "dumb") == 0);
  o.style = terminal ? ProgressStyle::kBar : ProgressStyle::kLines;
  struct winsize size {};
  if (terminal && ::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col >= 20) o.width = size.ws_col;
  return o;
}

FlagSpec QuietFlag() { return {"quiet", "", "no progress on standard error"}; }

ProgressBarOptions WithQuiet(ProgressBarOptions base, const Args& args) {
  if (args.Has("quiet")) base.style = ProgressStyle::kOff;
  return base;
}

}  // namespace remat::cli
