// A small XML well-formedness check for the SVG the reports write: tags
// balance, attributes are quoted, no stray '<' or '&'. Not a parser.
#ifndef REMAT_TESTS_VISUALIZE_XML_CHECK_H_
#define REMAT_TESTS_VISUALIZE_XML_CHECK_H_

#include <string>
#include <vector>

namespace remat::testing {

// Empty if `xml` is well formed; else what is wrong and where.
inline std::string XmlProblem(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return "bare '&' at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (xml[i] != '<') {
      if (xml[i] == '>') return "stray '>' at " + std::to_string(i);
      ++i;
      continue;
    }
    const bool closing = i + 1 < xml.size() && xml[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < xml.size() &&
           (isalnum(static_cast<unsigned char>(xml[j])) || xml[j] == '-' || xml[j] == ':'))
      ++j;
    const std::string name = xml.substr(name_start, j - name_start);
    if (name.empty()) return "bad tag at " + std::to_string(i);
    char quote = 0;
    while (j < xml.size() && (quote || xml[j] != '>')) {
      if (quote) {
        if (xml[j] == quote)
          quote = 0;
        else if (xml[j] == '<')
          return "'<' in an attribute at " + std::to_string(j);
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '<') {
        return "unclosed tag <" + name + " at " + std::to_string(i);
      }
      ++j;
    }
    if (j >= xml.size()) return "unterminated tag <" + name;
    const bool self_closing = xml[j - 1] == '/';
    if (closing) {
      if (open.empty() || open.back() != name) {
        return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">") +
               " at " + std::to_string(i);
      }
      open.pop_back();
    } else if (!self_closing) {
      open.push_back(name);
    }
    i = j + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  return "";
}

// The <svg>...</svg> fragments of an HTML page.
inline std::vector<std::string> SvgFragments(const std::string& html) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = html.find("<svg", at)) != std::string::npos) {
    const size_t end = html.find("</svg>", at);
    if (end == std::string::npos) break;
    out.push_back(html.substr(at, end + 6 - at));
    at = end;
  }
  return out;
}

// The first start tag ("<circle ... />") that contains `marker`, or "".
inline std::string TagWith(const std::string& xml, const std::string& marker) {
  const size_t at = xml.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = xml.rfind('<', at);
  const size_t end = xml.find('>', at);
  return xml.substr(start, end + 1 - start);
}

// The value of attribute `name` in a start tag, or "".
inline std::string AttrValue(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return tag.substr(start, tag.find('"', start) - start);
}

// How often `needle` occurs in `text`.
inline int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_VISUALIZE_XML_CHECK_H_
