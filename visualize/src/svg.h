// A small SVG writer: elements with attributes, text escaped, numbers
// written compactly. Charts use it; it knows nothing about memory or plans.
#ifndef REMAT_VISUALIZE_SVG_H_
#define REMAT_VISUALIZE_SVG_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::viz {

// "12", "12.5", "0.25": at most 2 decimals, no trailing zeros, no "-0";
// NaN and infinities are written as 0 so that no invalid attribute escapes.
std::string Num(double v);

// Escapes &, <, >, " and ' for text and attribute values.
std::string EscapeXml(std::string_view text);

// One attribute; numbers go through Num().
struct Attr {
  Attr(std::string n, std::string v) : name(std::move(n)), value(std::move(v)) {}
  Attr(std::string n, const char* v) : name(std::move(n)), value(v) {}
  Attr(std::string n, double v) : name(std::move(n)), value(Num(v)) {}
  Attr(std::string n, int v) : name(std::move(n)), value(std::to_string(v)) {}
  std::string name;
  std::string value;
};
using Attrs = std::vector<Attr>;

// Path data built point by point ("M10 20L30 40Z").
class PathData {
 public:
  PathData& MoveTo(double x, double y);
  PathData& LineTo(double x, double y);
  PathData& Close();
  bool empty() const { return d_.empty(); }
  const std::string& str() const { return d_; }

 private:
  std::string d_;
};

// Writes one <svg> element. Open/Close nest; Finish closes what is open and
// returns the markup. The svg scales to its container's width (viewBox).
class SvgWriter {
 public:
  // `id` and `label` become the svg's id and aria-label (may be empty).
  SvgWriter(double width, double height, const std::string& id, const std::string& label);

  void Open(const std::string& tag, const Attrs& attrs = {});
  void Close();
  // A childless element: <rect .../>.
  void Empty(const std::string& tag, const Attrs& attrs);
  // <text x y ...>text</text>.
  void Text(double x, double y, std::string_view text, const Attrs& attrs = {});
  // A hover tooltip for the element just opened: <title>text</title>.
  void Title(std::string_view text);
  std::string Finish();

 private:
  void StartTag(const std::string& tag, const Attrs& attrs);
  std::string out_;
  std::vector<std::string> open_;
};

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_SVG_H_
