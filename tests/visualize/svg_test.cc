#include "svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <random>
#include <string>

#include "xml_check.h"

namespace remat::viz {
namespace {

TEST(Num, WritesCompactFiniteNumbers) {
  EXPECT_EQ(Num(12), "12");
  EXPECT_EQ(Num(12.5), "12.5");
  EXPECT_EQ(Num(0.25), "0.25");
  EXPECT_EQ(Num(1.0 / 3), "0.33");
  EXPECT_EQ(Num(-0.001), "0");
  EXPECT_EQ(Num(-2.5), "-2.5");
  EXPECT_EQ(Num(std::nan("")), "0");
  EXPECT_EQ(Num(std::numeric_limits<double>::infinity()), "0");
}

// Num's digits written without printf, against printf's "%.2f" of the
// value rounded to hundredths, trailing zeros and point dropped: values at
// every magnitude to 1e16 (past its own digits, where printf writes), both
// signs, and halfway between hundredths.
std::string PrintfNum(double v) {
  if (!std::isfinite(v)) return "0";
  const double rounded = std::round(v * 100.0) / 100.0;
  if (rounded == 0) return "0";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", rounded);
  std::string out(text);
  out.erase(out.find_last_not_of('0') + 1);  // "%.2f" always writes a point
  if (out.back() == '.') out.pop_back();
  return out;
}

TEST(Num, WritesWhatPrintfWritesRoundedToHundredths) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  int checked = 0;
  for (int e = -4; e <= 16; ++e) {
    for (int i = 0; i < 2000; ++i) {
      const double magnitude = std::pow(10.0, e) * (1 + 9 * unit(rng));
      double v = i % 3 == 0 ? magnitude : std::round(magnitude * 1000) / 1000;  // some x.xx5
      if (i % 2 == 1) v = -v;
      ASSERT_EQ(Num(v), PrintfNum(v)) << std::setprecision(17) << v;
      ++checked;
    }
  }
  for (int k = -100000; k <= 100000; ++k) {
    const double v = k / 1000.0;  // every thousandth of [-100, 100]
    ASSERT_EQ(Num(v), PrintfNum(v)) << std::setprecision(17) << v;
    ++checked;
  }
  EXPECT_GT(checked, 200000);
}

TEST(EscapeXml, EscapesMarkup) {
  EXPECT_EQ(EscapeXml("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
}

TEST(SvgWriter, NestsAndClosesElements) {
  SvgWriter svg(100, 50, "chart", "a <chart>");
  svg.Open("g", {{"class", "x"}});
  svg.Empty("rect", {{"x", 1.5}, {"width", 10}});
  svg.Text(3, 4, "1 < 2 & 3");
  svg.Open("circle", {{"r", 2}});
  svg.Title("tip");
  const std::string out = svg.Finish();
  EXPECT_EQ(testing::XmlProblem(out), "");
  EXPECT_NE(out.find("viewBox=\"0 0 100 50\""), std::string::npos);
  EXPECT_NE(out.find("aria-label=\"a &lt;chart&gt;\""), std::string::npos);
  EXPECT_NE(out.find("<rect x=\"1.5\" width=\"10\"/>"), std::string::npos);
  EXPECT_NE(out.find(">1 &lt; 2 &amp; 3</text>"), std::string::npos);
  EXPECT_NE(out.find("<title>tip</title></circle>"), std::string::npos);
}

TEST(PathData, BuildsCommands) {
  PathData d;
  EXPECT_TRUE(d.empty());
  d.MoveTo(0, 1).LineTo(2.5, 3).Close();
  EXPECT_EQ(d.str(), "M0 1L2.5 3Z");
}

}  // namespace
}  // namespace remat::viz
