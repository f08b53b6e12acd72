#include "svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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
