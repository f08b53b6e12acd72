// The progress renderer with a fake clock: a bar for a terminal, rate-limited
// lines otherwise, nothing when quiet; the time left from the rate so far.
#include "progress_bar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace remat::cli {
namespace {

struct FakeClock {
  double now = 100;
  std::function<double()> Fn() {
    return [this] { return now; };
  }
};

ProgressBarOptions Options(ProgressStyle style, FakeClock& clock) {
  ProgressBarOptions o;
  o.style = style;
  o.clock = clock.Fn();
  return o;
}

// Runs an operation of `total` items taking `seconds_each`, from done = 0
// to done = total, through `bar`.
void RunOperation(ProgressBar& bar, FakeClock& clock, int total, double seconds_each,
                  const std::string& what = "profiling") {
  bar.Update({what, 0, total, ""});
  for (int i = 1; i <= total; ++i) {
    clock.now += seconds_each;
    bar.Update({what, i, total, "block" + std::to_string(i - 1)});
  }
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(ProgressBar, TimeLeftIsTheRateSoFar) {
  EXPECT_DOUBLE_EQ(SecondsLeft(4, 16, 10.0), 30.0);  // 2.5 s an item, 12 to go
  EXPECT_DOUBLE_EQ(SecondsLeft(16, 16, 10.0), 0.0);
  EXPECT_LT(SecondsLeft(0, 16, 10.0), 0);  // unknown before the first item
  EXPECT_EQ(FormatDuration(0.2), "0s");
  EXPECT_EQ(FormatDuration(42.4), "42s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(3725), "1h02m");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(ProgressBar, LineSaysWhatWhereAndHowLong) {
  EXPECT_EQ(ProgressLine({"profiling", 4, 16, "block3"}, 10.0),
            "planner: profiling 4/16 (25%) block3, 30s left");
  EXPECT_EQ(ProgressLine({"training", 0, 20, ""}, 0.0), "planner: training 0/20 (0%)");
  EXPECT_EQ(ProgressLine({"training", 20, 20, "step 20"}, 65.0),
            "planner: training done: 20/20 in 1m05s");
}

TEST(ProgressBar, BarFitsTheWidthAndShortensTheItem) {
  const std::string bar = BarText({"profiling", 8, 16, "block7"}, 8.0, 80);
  EXPECT_EQ(bar.rfind("profiling [", 0), 0u) << bar;
  EXPECT_NE(bar.find("8/16  50% block7  8s left"), std::string::npos) << bar;
  EXPECT_LE(bar.size(), 79u);
  const std::string narrow = BarText(
      {"profiling", 8, 16, "a_very_long_layer_name_indeed_" + std::string(40, 'x')}, 8.0, 60);
  EXPECT_LE(narrow.size(), 59u) << narrow;
  EXPECT_NE(narrow.find("...  8s left"), std::string::npos) << narrow;
  // Layer names come from files: no escape sequence reaches the terminal.
  EXPECT_EQ(BarText({"profiling", 1, 2, "evil\x1b[2J"}, 1.0, 80).find('\x1b'), std::string::npos);
}

TEST(ProgressBar, QuietPrintsNothing) {
  FakeClock clock;
  std::ostringstream err;
  {
    ProgressBar bar(err, Options(ProgressStyle::kOff, clock));
    EXPECT_FALSE(bar.Callback());  // operations skip building updates
    RunOperation(bar, clock, 20, 5.0);
  }
  EXPECT_EQ(err.str(), "");
}

TEST(ProgressBar, AQuickOperationPrintsNothing) {
  for (ProgressStyle style : {ProgressStyle::kLines, ProgressStyle::kBar}) {
    FakeClock clock;
    std::ostringstream err;
    ProgressBar bar(err, Options(style, clock));
    RunOperation(bar, clock, 100, 0.009);  // 0.9 s in all, under the 1 s delay
    EXPECT_EQ(err.str(), "");
  }
}

// 100 items at 0.1 s: a line only when a second has passed and another
// tenth is done, then the closing line.
TEST(ProgressBar, LinesAreRateLimited) {
  FakeClock clock;
  std::ostringstream err;
  ProgressBar bar(err, Options(ProgressStyle::kLines, clock));
  RunOperation(bar, clock, 100, 0.1);
  const std::string out = err.str();
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.rfind("planner: profiling 10/100 (10%) block9, 9s left\n", 0), 0u) << out;
  EXPECT_NE(out.find("planner: profiling 20/100 (20%) block19, 8s left\n"), std::string::npos)
      << out;
  EXPECT_EQ(Lines(out), 10) << out;  // 10%, 20%, ... 90%, and "done"
  EXPECT_NE(out.find("planner: profiling done: 100/100 in 10s\n"), std::string::npos) << out;
  // 1000 fast items over 2 s: the 10% steps are under a second apart.
  std::ostringstream fast;
  ProgressBar fast_bar(fast, Options(ProgressStyle::kLines, clock));
  RunOperation(fast_bar, clock, 1000, 0.002);
  EXPECT_EQ(Lines(fast.str()), 2) << fast.str();  // at 1 s (50%), and done
  // 100 slow items (0.5 s): a line every tenth, not every second.
  std::ostringstream slow;
  ProgressBar slow_bar(slow, Options(ProgressStyle::kLines, clock));
  RunOperation(slow_bar, clock, 100, 0.5);
  EXPECT_EQ(Lines(slow.str()), 11) << slow.str();  // 2%, 12%, ... 92%, and done
  EXPECT_NE(slow.str().find("planner: profiling 12/100 (12%) block11, 44s left\n"),
            std::string::npos)
      << slow.str();
}

TEST(ProgressBar, BarRedrawsInPlaceAndErasesItselfAtTheEnd) {
  FakeClock clock;
  std::ostringstream err;
  ProgressBar bar(err, Options(ProgressStyle::kBar, clock));
  RunOperation(bar, clock, 10, 0.5);
  const std::string out = err.str();
  EXPECT_EQ(out.find('\n'), std::string::npos) << out;
  // Drawn from the 1 s mark on (items 2..9), then erased.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 9) << out;
  EXPECT_NE(out.find("\rprofiling ["), std::string::npos) << out;
  EXPECT_NE(out.find("2/10  20% block1  4s left\x1b[K"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "\r\x1b[K");
}

TEST(ProgressBar, BarIsRedrawnAtMostTenTimesASecond) {
  FakeClock clock;
  std::ostringstream err;
  ProgressBar bar(err, Options(ProgressStyle::kBar, clock));
  RunOperation(bar, clock, 1000, 0.002);  // 2 s; drawn from 1 s on, every 0.1 s
  const std::string out = err.str();
  const long draws = std::count(out.begin(), out.end(), '\r') - 1;  // - the erase
  EXPECT_GE(draws, 9);
  EXPECT_LE(draws, 11);
}

// Something printed to the terminal between updates (train's step lines):
// the bar makes room and comes back at the next update.
TEST(ProgressBar, ClearMakesRoomForOtherOutput) {
  FakeClock clock;
  std::ostringstream err;
  ProgressBar bar(err, Options(ProgressStyle::kBar, clock));
  bar.Update({"training", 0, 4, ""});
  clock.now += 2;
  bar.Update({"training", 1, 4, "step 1"});
  bar.Clear();
  err << "step line\n";
  clock.now += 0.01;  // within the redraw interval, drawn anyway
  bar.Update({"training", 2, 4, "step 2"});
  EXPECT_NE(err.str().find("\r\x1b[Kstep line\n\rtraining ["), std::string::npos) << err.str();
}

// A failed operation sends no last update: Finish erases the bar; the next
// operation starts its own clock.
TEST(ProgressBar, FinishEndsAnOperationAndTheNextStartsAfresh) {
  FakeClock clock;
  std::ostringstream err;
  ProgressBar bar(err, Options(ProgressStyle::kLines, clock));
  bar.Update({"profiling", 0, 10, ""});
  clock.now += 5;
  bar.Update({"profiling", 5, 10, "block4"});
  bar.Finish();
  EXPECT_EQ(Lines(err.str()), 1);
  bar.Update({"pareto sweep", 0, 10, ""});
  clock.now += 0.5;
  bar.Update({"pareto sweep", 5, 10, "optimal at 1 GiB"});  // 0.5 s into the sweep: quiet
  EXPECT_EQ(Lines(err.str()), 1) << err.str();
}

}  // namespace
}  // namespace remat::cli
