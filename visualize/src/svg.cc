#include "svg.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace remat::viz {

std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  const double hundredths = std::round(v * 100.0);
  const double rounded = hundredths / 100.0;
  if (rounded == 0) return "0";
  // "%.2f" of `rounded`, the double nearest hundredths / 100, writes
  // hundredths / 100 itself where the double is within 0.005 of it (half
  // its ulp is below that under 2^52 / 100): the integer's digits with a
  // point before the last two, written here without printf.
  if (std::fabs(hundredths) < 1e15) {
    const auto k = static_cast<int64_t>(hundredths);
    uint64_t whole = static_cast<uint64_t>(k < 0 ? -k : k);
    const auto fraction = static_cast<int>(whole % 100);
    whole /= 100;
    char buf[32];
    char* end = buf + sizeof buf;
    char* p = end;
    if (fraction != 0) {
      if (fraction % 10 != 0) *--p = static_cast<char>('0' + fraction % 10);
      *--p = static_cast<char>('0' + fraction / 10);
      *--p = '.';
    }
    do {
      *--p = static_cast<char>('0' + whole % 10);
      whole /= 10;
    } while (whole != 0);
    if (k < 0) *--p = '-';
    return std::string(p, end);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", rounded);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

namespace {

// Appends `text` to `out` with XML's five special characters escaped, the
// runs between them appended whole.
void AppendEscaped(std::string* out, std::string_view text) {
  size_t from = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // The five characters are all below '?' (63): one compare passes most.
    if (c > '>') continue;
    const char* entity = nullptr;
    switch (c) {
      case '&':
        entity = "&amp;";
        break;
      case '<':
        entity = "&lt;";
        break;
      case '>':
        entity = "&gt;";
        break;
      case '"':
        entity = "&quot;";
        break;
      case '\'':
        entity = "&#39;";
        break;
      default:
        continue;
    }
    out->append(text.substr(from, i - from));
    out->append(entity);
    from = i + 1;
  }
  out->append(text.substr(from));
}

// Appends ` name="value"` (the value escaped) to `out`.
void AppendAttr(std::string* out, std::string_view name, std::string_view value) {
  *out += ' ';
  out->append(name);
  out->append("=\"");
  AppendEscaped(out, value);
  *out += '"';
}

}  // namespace

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendEscaped(&out, text);
  return out;
}

PathData& PathData::MoveTo(double x, double y) {
  d_ += 'M';
  d_ += Num(x);
  d_ += ' ';
  d_ += Num(y);
  return *this;
}

PathData& PathData::LineTo(double x, double y) {
  d_ += 'L';
  d_ += Num(x);
  d_ += ' ';
  d_ += Num(y);
  return *this;
}

PathData& PathData::Close() {
  d_ += 'Z';
  return *this;
}

SvgWriter::SvgWriter(double width, double height, const std::string& id, const std::string& label) {
  Attrs attrs = {
      {"xmlns", "http://www.w3.org/2000/svg"},
      {"viewBox", "0 0 " + Num(width) + " " + Num(height)},
      {"width", width},
      {"role", "img"},
      {"font-family", "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"},
      {"font-size", 12}};
  if (!id.empty()) attrs.emplace_back("id", id);
  if (!label.empty()) attrs.emplace_back("aria-label", label);
  Open("svg", attrs);
}

void SvgWriter::StartTag(const std::string& tag, const Attrs& attrs) {
  out_ += '<';
  out_ += tag;
  for (const Attr& a : attrs) AppendAttr(&out_, a.name, a.value);
}

void SvgWriter::Open(const std::string& tag, const Attrs& attrs) {
  StartTag(tag, attrs);
  out_ += '>';
  open_.push_back(tag);
}

void SvgWriter::Close() {
  if (open_.empty()) return;
  out_ += "</";
  out_ += open_.back();
  out_ += ">\n";
  open_.pop_back();
}

void SvgWriter::Empty(const std::string& tag, const Attrs& attrs) {
  StartTag(tag, attrs);
  out_ += "/>\n";
}

void SvgWriter::Text(double x, double y, std::string_view text, const Attrs& attrs) {
  out_ += "<text";
  AppendAttr(&out_, "x", Num(x));
  AppendAttr(&out_, "y", Num(y));
  for (const Attr& a : attrs) AppendAttr(&out_, a.name, a.value);
  out_ += '>';
  AppendEscaped(&out_, text);
  out_ += "</text>\n";
}

void SvgWriter::Title(std::string_view text) {
  out_ += "<title>";
  AppendEscaped(&out_, text);
  out_ += "</title>";
}

std::string SvgWriter::Finish() {
  while (!open_.empty()) Close();
  return std::move(out_);
}

}  // namespace remat::viz
