// The report page's stylesheet, inlined into every HTML report.
#ifndef REMAT_VISUALIZE_HTML_STYLE_H_
#define REMAT_VISUALIZE_HTML_STYLE_H_

namespace remat::viz {

extern const char kReportCss[];

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_HTML_STYLE_H_
