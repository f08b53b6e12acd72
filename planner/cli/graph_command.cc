// planner [plan] --budget SIZE GRAPH.json: a graph profile (several chains,
// docs/graphs.md) planned as one step, per chain.
#include <nlohmann/json.hpp>

#include <iterator>
#include <ostream>
#include <set>

#include "commands.h"
#include "traced_input.h"
#include "remat/io/io.h"
#include "remat/io/units.h"
#include "remat/profile/graph_profile.h"
#include "remat/report/graph_report.h"
#include "remat/strategies/graph_plan.h"
#include "remat/strategies/strategies.h"

namespace remat::cli {
namespace {

// The lines a trace records in its chains' trace.assumed (a value the
// config lacks, taken as its model takes it: docs/trace.md), each once.
void PrintTraceNotes(const std::string& text, std::ostream& err) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("chains") || !doc["chains"].is_array()) return;
  std::set<std::string> printed;
  for (const nlohmann::json& chain : doc["chains"]) {
    const nlohmann::json* assumed = nullptr;
    if (chain.is_object() && chain.contains("profile") && chain["profile"].is_object() &&
        chain["profile"].contains("trace") && chain["profile"]["trace"].is_object() &&
        chain["profile"]["trace"].contains("assumed")) {
      assumed = &chain["profile"]["trace"]["assumed"];
    }
    if (assumed == nullptr || !assumed->is_array()) continue;
    for (const nlohmann::json& note : *assumed) {
      if (note.is_string() && printed.insert(note.get<std::string>()).second) {
        err << "planner: note: traced: " << note.get<std::string>() << "\n";
      }
    }
  }
}

}  // namespace

Status PlanGraphCommand(const Args& args, const std::vector<FlagSpec>& flags,
                        const std::string& path, const std::string& text, Environment& env,
                        bool traced) {
  static const std::set<std::string> kGraphFlags = {"budget", "slots", "strategy", "every",
                                                    "format", "json",  "o",        "quiet",
                                                    "help"};
  std::set<std::string> taken(kGraphFlags);
  if (traced) taken.insert(std::begin(kTracedJobFlags), std::end(kTracedJobFlags));
  for (const FlagSpec& f : flags) {
    if (args.Has(f.name) && taken.count(f.name) == 0) {
      return Status::Invalid("option --" + f.name + " applies to single chains; a graph profile (" +
                             path +
                             ") takes --budget, --slots, --strategy none|uniform, --every, "
                             "--format text|json and -o");
    }
  }
  REMAT_ASSIGN_OR_RETURN(const GraphProfile graph, ParseGraphProfile(text, path));
  if (traced) PrintTraceNotes(text, *env.err);
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
  REMAT_ASSIGN_OR_RETURN(GraphPlanSet set, PlanGraph(graph, options));
  // --strategy none|uniform (--every K): every chain planned so, without a
  // budget (uniform: every K-th block of each chain checkpointed), in place
  // of the searched plan.
  if (args.Has("strategy") || args.Has("every")) {
    Strategy strategy = Strategy::kUniform;
    if (args.Has("strategy")) {
      REMAT_ASSIGN_OR_RETURN(strategy, ParseStrategy(args.Get("strategy")));
    }
    if (strategy != Strategy::kNone && strategy != Strategy::kUniform) {
      return Status::Invalid("option --strategy: a graph profile takes none or uniform (every "
                             "chain planned so), got '" +
                             args.Get("strategy") + "'");
    }
    if (strategy == Strategy::kNone && args.Has("every")) {
      return Status::Invalid("option --every applies to --strategy uniform");
    }
    PlanOptions o;
    o.strategy = strategy;
    REMAT_ASSIGN_OR_RETURN(const int64_t every, args.GetInt("every", 0, 1, 1 << 20));
    o.every = static_cast<int>(every);
    std::vector<Schedule> schedules;
    for (const GraphChain& c : graph.chains) {
      REMAT_ASSIGN_OR_RETURN(const PlanSet planned, MakePlan(c.profile, o));
      schedules.push_back(planned.chosen.schedule);
    }
    REMAT_ASSIGN_OR_RETURN(set.chosen,
                           MakeGraphPlan(graph, std::move(schedules), options.budget_bytes,
                                         strategy));
  }
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
