// Graph profiles (see graph_profile.h): parsing, validation, the order.
#include "remat/profile/graph_profile.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/json_fields.h"
#include "remat/io/json_top_level.h"
#include "profile/profile_json.h"
#include "remat/io/checked_math.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::JsonObjectReader;
using internal::ParseJson;

namespace {

using DiGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

std::string ChainNames(const GraphProfile& g, const std::vector<int>& chains) {
  std::string s;
  for (int c : chains) s += (s.empty() ? "" : ", ") + g.chains[c].name;
  return s;
}

std::vector<int> AllChains(const GraphProfile& g) {
  std::vector<int> all(g.chains.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

// The chains on a cycle (a strongly connected component of two or more).
std::vector<int> CycleChains(const DiGraph& dag) {
  std::vector<int> component(boost::num_vertices(dag));
  const int n = boost::strong_components(dag, component.data());
  std::vector<int> size(n, 0);
  for (int c : component) ++size[c];
  std::vector<int> on_cycle;
  for (size_t v = 0; v < component.size(); ++v) {
    if (size[component[v]] > 1) on_cycle.push_back(static_cast<int>(v));
  }
  return on_cycle;
}

Result<int> ChainIndex(const GraphProfile& g, const nlohmann::json& edge, const char* key,
                       const std::string& where) {
  JsonObjectReader r(edge, where);
  std::string name;
  REMAT_RETURN_IF_ERROR(r.String(key, &name, true));
  for (int c = 0; c < g.num_chains(); ++c) {
    if (g.chains[c].name == name) return c;
  }
  return r.Error(key, "unknown chain '" + name + "' (chains: " + ChainNames(g, AllChains(g)) + ")");
}

Status ParseReaders(const nlohmann::json& edge, const std::string& where, GraphEdge* e) {
  JsonObjectReader r(edge, where);
  if (!edge.contains("readers")) return r.Error("readers", "missing (required)");
  const nlohmann::json& readers = edge.at("readers");
  if (!readers.is_array() || readers.empty()) {
    return r.Error("readers",
                   "expected a non-empty array of layer indices of the target chain, "
                   "got " +
                       DescribeJsonValue(readers));
  }
  for (const nlohmann::json& v : readers) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30)) {
      return r.Error("readers",
                     "expected layer indices (integers >= 0), got " + DescribeJsonValue(v));
    }
    e->readers.push_back(static_cast<int>(v.get<int64_t>()));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateGraphProfile(GraphProfile* graph, const std::string& source) {
  GraphProfile& g = *graph;
  if (g.chains.empty())
    return Status::Invalid(source + ": field 'chains': expected at least one chain");
  std::set<std::string> names;
  for (int c = 0; c < g.num_chains(); ++c) {
    const GraphChain& chain = g.chains[c];
    const std::string where = source + ": chains[" + std::to_string(c) + "]";
    if (chain.name.empty())
      return Status::Invalid(where + ": field 'name': expected a non-empty name");
    if (!names.insert(chain.name).second) {
      return Status::Invalid(where + ": field 'name': '" + chain.name + "' names two chains");
    }
    const Profile& p = chain.profile;
    if (p.layers.empty())
      return Status::Invalid(where + ": profile: field 'layers': expected at least one layer");
    REMAT_RETURN_IF_ERROR(ValidateProfile(p, where + ": profile"));
    if (p.grad_accumulation != 1) {
      return Status::Invalid(where +
                             ": profile: field 'grad_accumulation': graphs plan one micro-batch "
                             "per step (1), got " +
                             std::to_string(p.grad_accumulation));
    }
    if (p.host_link.present()) {
      return Status::Invalid(where +
                             ": profile: field 'host_link': graphs do not model offload; leave "
                             "host_link out");
    }
    for (const LayerProfile& l : p.layers) {
      if (l.in_flight_microbatches != 1) {
        return Status::Invalid(where + ": profile: layer '" + l.name +
                               "': graphs model a single rank (in_flight_microbatches 1)");
      }
    }
  }
  // Every chain's bytes live at once, and every crossing tensor three times
  // (the output, its gradient, a reader's part): sums over the graph stay
  // in range.
  CheckedInt total;
  for (const GraphChain& chain : g.chains) {
    const Profile& p = chain.profile;
    total += CheckedInt(p.static_bytes()) + p.optimizer_workspace_bytes +
             p.layers.back().output_bytes * 3;
    for (const LayerProfile& l : p.layers) {
      total += CheckedInt(l.input_bytes) + l.activation_bytes +
               std::max(l.forward_workspace_bytes, l.nograd_workspace_bytes()) +
               std::max<int64_t>({l.backward_workspace_bytes, 0,
                                  l.recompute_backward_workspace_bytes.value_or(0)}) +
               std::max<int64_t>(l.accumulating_workspace_bytes(), 0) + l.gradient_bytes +
               l.skip_bytes * 2;
      for (const SelectiveOption& o : l.selective) {
        total += CheckedInt(o.recompute_workspace_bytes) +
                 std::max<int64_t>(o.forward_workspace_bytes, 0);
      }
    }
  }
  if (!total.ok()) {
    return Status::Invalid(
        source + ": field 'chains': byte counts add up past 4 EiB; not a real graph profile");
  }
  DiGraph dag(g.chains.size());
  std::set<std::pair<int, int>> pairs;
  for (size_t i = 0; i < g.edges.size(); ++i) {
    GraphEdge& e = g.edges[i];
    const std::string where = source + ": edges[" + std::to_string(i) + "]";
    if (e.from < 0 || e.from >= g.num_chains() || e.to < 0 || e.to >= g.num_chains()) {
      return Status::Invalid(where + ": fields 'from', 'to': chain index out of range");
    }
    if (e.from == e.to) {
      return Status::Invalid(where + ": field 'to': chain '" + g.chains[e.to].name +
                             "' cannot read its own output; an edge joins two chains");
    }
    if (!pairs.insert({e.from, e.to}).second) {
      return Status::Invalid(where + ": a second edge from '" + g.chains[e.from].name + "' to '" +
                             g.chains[e.to].name + "'; list all readers in one edge");
    }
    const int layers = g.chains[e.to].profile.num_layers();
    if (e.readers.empty())
      return Status::Invalid(where + ": field 'readers': expected at least one layer");
    for (size_t r = 0; r < e.readers.size(); ++r) {
      if (e.readers[r] < 0 || e.readers[r] >= layers) {
        return Status::Invalid(where + ": field 'readers': layer " + std::to_string(e.readers[r]) +
                               " is not a layer of chain '" + g.chains[e.to].name + "' (0.." +
                               std::to_string(layers - 1) + ")");
      }
      if (r > 0 && e.readers[r] <= e.readers[r - 1]) {
        return Status::Invalid(
            where + ": field 'readers': expected ascending unique layer indices, got " +
            std::to_string(e.readers[r - 1]) + " before " + std::to_string(e.readers[r]));
      }
    }
    boost::add_edge(e.from, e.to, dag);
  }
  const std::vector<int> cycle = CycleChains(dag);
  if (!cycle.empty()) {
    return Status::Invalid(source + ": field 'edges': the chains " + ChainNames(g, cycle) +
                           " read each other's outputs in a cycle; a graph profile is acyclic");
  }
  std::vector<DiGraph::vertex_descriptor> reverse_order;
  boost::topological_sort(dag, std::back_inserter(reverse_order));
  g.order.assign(reverse_order.rbegin(), reverse_order.rend());
  return Status::Ok();
}

Result<GraphProfile> ParseGraphProfile(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(const nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) {
    return Status::Invalid(source +
                           ": expected a graph profile object with a 'chains' array, got " +
                           DescribeJsonValue(doc));
  }
  JsonObjectReader r(doc, source);
  REMAT_RETURN_IF_ERROR(r.NoUnknownKeys({"model", "chains", "edges"}));
  GraphProfile g;
  REMAT_RETURN_IF_ERROR(r.String("model", &g.model, false));
  if (!doc.contains("chains")) return r.Error("chains", "missing (required)");
  const nlohmann::json& chains = doc.at("chains");
  if (!chains.is_array()) {
    return r.Error("chains", "expected an array of {\"name\", \"profile\"} objects, got " +
                                 DescribeJsonValue(chains));
  }
  for (size_t i = 0; i < chains.size(); ++i) {
    const std::string where = source + ": chains[" + std::to_string(i) + "]";
    const nlohmann::json& c = chains[i];
    if (!c.is_object()) {
      return Status::Invalid(where + ": expected an object with 'name' and 'profile', got " +
                             DescribeJsonValue(c));
    }
    JsonObjectReader cr(c, where);
    REMAT_RETURN_IF_ERROR(cr.NoUnknownKeys({"name", "profile"}));
    GraphChain chain;
    REMAT_RETURN_IF_ERROR(cr.String("name", &chain.name, true));
    if (!c.contains("profile")) return cr.Error("profile", "missing (required)");
    REMAT_ASSIGN_OR_RETURN(chain.profile,
                           internal::ProfileFromJson(c.at("profile"), where + ": profile"));
    g.chains.push_back(std::move(chain));
  }
  if (doc.contains("edges")) {
    const nlohmann::json& edges = doc.at("edges");
    if (!edges.is_array()) {
      return r.Error("edges", "expected an array of {\"from\", \"to\", \"readers\"} objects, got " +
                                  DescribeJsonValue(edges));
    }
    for (size_t i = 0; i < edges.size(); ++i) {
      const std::string where = source + ": edges[" + std::to_string(i) + "]";
      const nlohmann::json& e = edges[i];
      if (!e.is_object()) {
        return Status::Invalid(where +
                               ": expected an object with 'from', 'to' and 'readers', got " +
                               DescribeJsonValue(e));
      }
      REMAT_RETURN_IF_ERROR(JsonObjectReader(e, where).NoUnknownKeys({"from", "to", "readers"}));
      GraphEdge edge;
      REMAT_ASSIGN_OR_RETURN(edge.from, ChainIndex(g, e, "from", where));
      REMAT_ASSIGN_OR_RETURN(edge.to, ChainIndex(g, e, "to", where));
      REMAT_RETURN_IF_ERROR(ParseReaders(e, where, &edge));
      g.edges.push_back(std::move(edge));
    }
  }
  REMAT_RETURN_IF_ERROR(ValidateGraphProfile(&g, source));
  return g;
}

std::string GraphProfileToJson(const GraphProfile& g) {
  nlohmann::ordered_json j;
  if (!g.model.empty()) j["model"] = g.model;
  j["chains"] = nlohmann::ordered_json::array();
  for (const GraphChain& c : g.chains) {
    j["chains"].push_back({{"name", c.name}, {"profile", internal::ProfileJsonValue(c.profile)}});
  }
  j["edges"] = nlohmann::ordered_json::array();
  for (const GraphEdge& e : g.edges) {
    j["edges"].push_back(
        {{"from", g.chains[e.from].name}, {"to", g.chains[e.to].name}, {"readers", e.readers}});
  }
  return internal::DumpDocument(j);
}

bool IsGraphProfileText(std::string_view json_text) {
  // (A measured chain profile of a few MB is told apart without a scan.)
  if (!RootHasKeyIfValid(json_text, "chains")) return false;
  const JsonTopLevel top = ScanJsonTopLevel(json_text);
  return top.object && top.Has("chains");
}

int64_t GraphStaticBytes(const GraphProfile& g) {
  int64_t total = 0;
  for (const GraphChain& c : g.chains) total += c.profile.static_bytes();
  return total;
}

}  // namespace remat
