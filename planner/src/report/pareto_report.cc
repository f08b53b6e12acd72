// `planner pareto` output: the overhead-versus-peak table and its JSON.
#include "remat/report/pareto_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "remat/report/report.h"
#include "remat/io/units.h"

namespace remat {

using internal::DumpDocument;
namespace {

double OverheadPct(const ParetoCurve& c, double step_ms) {
  return c.baseline_step_ms > 0 ? 100.0 * (step_ms / c.baseline_step_ms - 1) : 0;
}

std::string Fixed(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Cell(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : std::string(width - s.size(), ' ') + s;
}

// "+12.3% 11.90 GiB", or "-" when it does not fit.
std::string Point(const ParetoCurve& c, const ParetoPoint& p) {
  if (!p.fits && p.budget_bytes > 0) return "-";
  return Fixed("%+.1f%%", OverheadPct(c, p.step_ms)) + " " + FormatBytes(p.peak_bytes);
}

nlohmann::ordered_json PointJson(const ParetoCurve& c, const ParetoPoint& p) {
  nlohmann::ordered_json j;
  j["budget_bytes"] = p.budget_bytes;
  j["strategy"] = ToString(p.strategy);
  j["fits"] = p.fits;
  j["peak_bytes"] = p.peak_bytes;
  j["step_ms"] = p.step_ms;
  j["recompute_ms"] = p.recompute_ms;
  j["overhead_pct"] = OverheadPct(c, p.step_ms);
  j["parameter"] = p.parameter;
  return j;
}

}  // namespace

std::string FormatParetoText(const ParetoCurve& c, const Profile& p) {
  constexpr size_t kWidth = 18;
  std::ostringstream o;
  o << "remat Pareto sweep for " << p.model << " (" << p.source << " profile"
    << (p.device.empty() ? "" : ", times for " + p.device) << ", " << p.num_layers()
    << " layers)\n";
  o << "  without recompute  step " << FormatMillis(c.baseline_step_ms) << ", peak "
    << FormatBytes(c.none_peak_bytes) << " ("
    << DescribeModelState(p.model_state_bytes() + p.static_memory.buffer_bytes, p) << ")\n\n";
  o << "Step time over the no-recompute step and predicted peak of each strategy's best\n"
       "plan within each budget ('-': none fits):\n";
  o << Cell("budget", 12);
  for (Strategy s : c.strategies) o << Cell(ToString(s), kWidth);
  o << "\n";
  const size_t n = c.strategies.size();
  for (size_t b = 0; b < c.budgets.size(); ++b) {
    o << Cell(FormatBytes(c.budgets[b]), 12);
    for (size_t k = 0; k < n; ++k) o << Cell(Point(c, c.points[b * n + k]), kWidth);
    o << "\n";
  }
  o << "\nEach strategy without a budget (its default), and the fastest plan within the same peak:\n";
  for (size_t i = 0; i < c.defaults.size(); ++i) {
    const ParetoPoint& d = c.defaults[i];
    const ParetoPoint& best = c.best_at_default_peaks[i];
    std::string line = "  " + std::string(ToString(d.strategy));
    line.resize(18, ' ');
    line += Point(c, d) + (d.parameter.empty() ? "" : " (" + d.parameter + ")");
    line.resize(std::max<size_t>(line.size() + 2, 58), ' ');
    if (best.strategy == d.strategy) {
      line += "already the fastest";
    } else {
      line += "-> " + std::string(ToString(best.strategy)) + " " +
              Fixed("%+.1f%%", OverheadPct(c, best.step_ms)) + " " + FormatBytes(best.peak_bytes);
    }
    o << line << "\n";
  }
  return o.str();
}

std::string ParetoToJson(const ParetoCurve& c, const Profile& p) {
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["source"] = p.source;
  j["device"] = p.device;
  j["static_bytes"] = p.static_bytes();
  j["baseline_step_ms"] = c.baseline_step_ms;
  j["none_peak_bytes"] = c.none_peak_bytes;
  j["strategies"] = nlohmann::ordered_json::array();
  for (Strategy s : c.strategies) j["strategies"].push_back(ToString(s));
  j["budgets"] = c.budgets;
  j["points"] = nlohmann::ordered_json::array();
  for (const ParetoPoint& pt : c.points) j["points"].push_back(PointJson(c, pt));
  j["frontier"] = nlohmann::ordered_json::object();
  for (Strategy s : c.strategies) {
    nlohmann::ordered_json f = nlohmann::ordered_json::array();
    for (const ParetoPoint& pt : Frontier(c, s)) {
      f.push_back({{"peak_bytes", pt.peak_bytes},
                   {"step_ms", pt.step_ms},
                   {"overhead_pct", OverheadPct(c, pt.step_ms)}});
    }
    j["frontier"][ToString(s)] = f;
  }
  j["defaults"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < c.defaults.size(); ++i) {
    nlohmann::ordered_json d = PointJson(c, c.defaults[i]);
    d["best_at_peak"] = PointJson(c, c.best_at_default_peaks[i]);
    j["defaults"].push_back(d);
  }
  return DumpDocument(j);
}

}  // namespace remat
