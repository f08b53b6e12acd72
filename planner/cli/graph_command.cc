// planner [plan] --budget SIZE GRAPH.json: a graph profile (several chains,
// docs/graphs.md) planned as one step, per chain.
#include <ostream>
#include <set>

#include "commands.h"
#include "remat/io/io.h"
#include "remat/io/units.h"
#include "remat/profile/graph_profile.h"
#include "remat/report/graph_report.h"
#include "remat/strategies/graph_plan.h"

namespace remat::cli {

Status PlanGraphCommand(const Args& args, const std::vector<FlagSpec>& flags,
                        const std::string& path, const std::string& text, Environment& env) {
  static const std::set<std::string> kGraphFlags = {"budget", "slots", "format", "json",
                                                    "o",      "quiet", "help"};
  for (const FlagSpec& f : flags) {
    if (args.Has(f.name) && kGraphFlags.count(f.name) == 0) {
      return Status::Invalid("option --" + f.name + " applies to single chains; a graph profile (" +
                             path + ") takes --budget, --slots, --format text|json and -o");
    }
  }
  REMAT_ASSIGN_OR_RETURN(const GraphProfile graph, ParseGraphProfile(text, path));
  GraphPlanOptions options;
  if (args.Has("budget")) {
    Result<int64_t> b = ParseBytes(args.Get("budget"));
    if (!b.ok()) return b.status().WithPrefix("option --budget");
    options.budget_bytes = *b;
  }
  REMAT_ASSIGN_OR_RETURN(const int64_t slots, args.GetInt("slots", 0, 2, 1 << 20));
  options.slots = static_cast<int>(slots);
  const std::string format = args.Get("format", args.Has("json") ? "json" : "text");
  if (format != "text" && format != "json") {
    return Status::Invalid("option --format: a graph plan prints text or json, got '" + format +
                           "'");
  }
  if (args.Has("json") && format != "json") {
    return Status::Invalid("--json is --format json; it contradicts --format " + format);
  }
  REMAT_ASSIGN_OR_RETURN(const GraphPlanSet set, PlanGraph(graph, options));
  const std::string json = GraphPlanToJson(set, graph);
  if (args.Has("o")) REMAT_RETURN_IF_ERROR(WriteOutputFile(args.Get("o"), json));
  *env.out << (format == "json" && !args.Has("o") ? json : FormatGraphPlanText(set, graph, path));
  if (!set.chosen.fits) {
    return Status::NoFit("no graph plan fits " + FormatBytes(options.budget_bytes) +
                         "; the least peak found is " +
                         FormatBytes(set.chosen.predicted.peak_bytes));
  }
  return Status::Ok();
}

}  // namespace remat::cli
