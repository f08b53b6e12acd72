// Text and JSON of a graph plan (see graph_report.h).
#include "remat/report/graph_report.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "io/json_fields.h"
#include "remat/io/units.h"

namespace remat {
namespace {

// "2 checkpointed (block1, block3), 1 recomputed (block2)" or "nothing checkpointed".
std::string DescribeDecisions(const Plan& plan, const Profile& profile) {
  std::string out;
  for (LayerDecision d :
       {LayerDecision::kCheckpoint, LayerDecision::kRecompute, LayerDecision::kSelective}) {
    std::string names;
    int count = 0;
    for (size_t i = 0; i < plan.decisions.size(); ++i) {
      if (plan.decisions[i] != d) continue;
      names += (count++ ? ", " : "") + profile.layers[i].name;
    }
    if (count == 0) continue;
    const char* what = d == LayerDecision::kCheckpoint  ? "checkpointed"
                       : d == LayerDecision::kRecompute ? "recomputed in a segment"
                                                        : "selective";
    out += (out.empty() ? "" : ", ") + std::to_string(count) + " " + what + " (" + names + ")";
  }
  if (out.empty()) out = "nothing checkpointed";
  if (plan.predicted.recompute_ops > 0) {
    out += "; " + std::to_string(plan.predicted.recompute_ops) + " recomputes";
  }
  return out;
}

std::string Summary(const GraphPlan& plan) {
  std::ostringstream s;
  s << "peak " << FormatBytes(plan.predicted.peak_bytes) << ", step "
    << FormatMillis(plan.predicted.step_ms)
    << (plan.budget_bytes > 0 ? (plan.fits ? ", fits" : ", does not fit") : "");
  return s.str();
}

nlohmann::ordered_json Totals(const GraphPlan& plan) {
  nlohmann::ordered_json j;
  j["fits"] = plan.fits;
  j["peak_bytes"] = plan.predicted.peak_bytes;
  j["static_bytes"] = plan.predicted.static_bytes;
  j["step_ms"] = plan.predicted.step_ms;
  j["recompute_ms"] = plan.predicted.recompute_ms;
  return j;
}

}  // namespace

std::string FormatGraphPlanText(const GraphPlanSet& set, const GraphProfile& graph,
                                const std::string& input_path) {
  std::ostringstream s;
  const GraphPlan& chosen = set.chosen;
  std::string order;
  for (int c : graph.order) order += (order.empty() ? "" : " -> ") + graph.chains[c].name;
  s << "graph " << (graph.model.empty() ? input_path : graph.model) << ": " << graph.num_chains()
    << " chains, forward " << order << ", backward in reverse\n";
  if (chosen.budget_bytes > 0) s << "budget " << FormatBytes(chosen.budget_bytes) << "\n";
  for (int c : graph.order) {
    const Profile& p = graph.chains[c].profile;
    const Plan& plan = chosen.chains[c];
    s << "  " << graph.chains[c].name << " (" << p.num_layers()
      << " layers): " << DescribeDecisions(plan, p) << "\n";
  }
  for (const GraphEdge& e : graph.edges) {
    s << "  " << graph.chains[e.from].name << "'s output ("
      << FormatBytes(graph.output_bytes(e.from)) << ") read by " << e.readers.size() << " layer"
      << (e.readers.size() == 1 ? "" : "s") << " of " << graph.chains[e.to].name << "\n";
  }
  s << "predicted: " << Summary(chosen) << " (model state "
    << FormatBytes(chosen.predicted.static_bytes) << ", recompute "
    << FormatMillis(chosen.predicted.recompute_ms) << ")\n";
  s << "each chain planned on its own: " << Summary(set.independent) << "\n";
  s << "nothing checkpointed: " << Summary(set.baseline) << "\n";
  return s.str();
}

std::string GraphPlanToJson(const GraphPlanSet& set, const GraphProfile& graph) {
  nlohmann::ordered_json j;
  j["model"] = graph.model;
  j["budget_bytes"] = set.chosen.budget_bytes;
  const nlohmann::ordered_json totals = Totals(set.chosen);
  for (auto it = totals.begin(); it != totals.end(); ++it) j[it.key()] = it.value();
  j["chains"] = nlohmann::ordered_json::array();
  for (int c = 0; c < graph.num_chains(); ++c) {
    const Plan& plan = set.chosen.chains[c];
    nlohmann::ordered_json chain;
    chain["name"] = graph.chains[c].name;
    chain["layers"] = graph.chains[c].profile.num_layers();
    // What remat.apply maps the decisions onto the model's modules by.
    chain["layer_names"] = nlohmann::ordered_json::array();
    chain["input_bytes"] = nlohmann::ordered_json::array();
    for (const LayerProfile& layer : graph.chains[c].profile.layers) {
      chain["layer_names"].push_back(layer.name);
      chain["input_bytes"].push_back(layer.input_bytes);
    }
    chain["decisions"] = nlohmann::ordered_json::array();
    for (LayerDecision d : plan.decisions) chain["decisions"].push_back(ToString(d));
    chain["schedule"] = nlohmann::ordered_json::parse(ScheduleToJson(plan.schedule));
    chain["alone_peak_bytes"] = plan.predicted.peak_bytes;
    j["chains"].push_back(chain);
  }
  j["independent"] = Totals(set.independent);
  j["baseline"] = Totals(set.baseline);
  return internal::DumpDocument(j);
}

}  // namespace remat
