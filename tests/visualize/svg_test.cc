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

// EscapeXml character by character: each of the five special characters
// replaced by its entity, every other byte kept.
std::string EscapedByCharacter(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

TEST(EscapeXml, EscapesEachByteAsByCharacter) {
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(EscapeXml(one), EscapedByCharacter(one)) << b;
  }
  // Runs of plain bytes between, before and after special ones, special
  // ones side by side, bytes above 127.
  const std::string pool = "&<>\"'ab?=\xc3\xa9 ";
  std::mt19937 rng(7);
  for (int n = 0; n < 2000; ++n) {
    std::string text(rng() % 24, ' ');
    for (char& c : text) c = pool[rng() % pool.size()];
    EXPECT_EQ(EscapeXml(text), EscapedByCharacter(text)) << text;
  }
}

TEST(SvgWriter, WritesEachElementWhole) {
  SvgWriter svg(10, 20, "", "");
  svg.Open("g", {{"class", "a&b"}, {"data-n", 3}});
  svg.Text(1.25, -2, "x'<y>\"", {{"fill", "red"}, {"note", "<&>"}});
  svg.Empty("path", {{"d", PathData().MoveTo(0, 0.5).LineTo(-1.25, 2).Close().str()}});
  svg.Open("rect", {});
  svg.Title("a & b\n<c>");
  EXPECT_EQ(svg.Finish(),
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 10 20\" width=\"10\" "
            "role=\"img\" font-family=\"system-ui, -apple-system, &#39;Segoe UI&#39;, Roboto, "
            "&#39;DejaVu Sans&#39;, sans-serif\" font-size=\"12\">"
            "<g class=\"a&amp;b\" data-n=\"3\">"
            "<text x=\"1.25\" y=\"-2\" fill=\"red\" note=\"&lt;&amp;&gt;\">"
            "x&#39;&lt;y&gt;&quot;</text>\n"
            "<path d=\"M0 0.5L-1.25 2Z\"/>\n"
            "<rect><title>a &amp; b\n&lt;c&gt;</title></rect>\n</g>\n</svg>\n");
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
