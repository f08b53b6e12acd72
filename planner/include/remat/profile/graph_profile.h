// Graph profiles: several chains of layers joined where one chain's output
// is read by layers of others.
//
// An encoder-decoder (T5, BART, Whisper) is two chains: the encoder's output
// is read by the cross-attention of every decoder block. A vision-language
// model is a vision tower whose output the language model's embedding layer
// splices into its sequence. Each chain is a Profile (profile.h) with its
// own layers, model state and batch input x[0]; an edge says that the
// source chain's output (its x[L], the output_bytes of its last layer) is
// read by the listed layers of the target chain. The chains form a DAG
// (Boost.Graph checks it and orders it). The JSON format is in
// docs/graphs.md; a file with a top-level "chains" array is a graph
// profile, one with "layers" a single chain.
//
// A reader layer's own figures leave the shared tensor out: its
// activation_bytes do not count the source's output (the graph holds it
// once), its backward workspace does not count the gradient it writes into
// the source's output (the graph accumulates that gradient,
// graph_simulator.h).
#ifndef REMAT_GRAPH_PROFILE_H_
#define REMAT_GRAPH_PROFILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "remat/io/status.h"
#include "remat/profile/profile.h"

namespace remat {

struct GraphChain {
  std::string name;  // unique in the graph, e.g. "encoder"
  Profile profile;
};

// Chain `from`'s output is read by layers `readers` (ascending, unique,
// each in [0, L) of chain `to`).
struct GraphEdge {
  int from = 0;
  int to = 0;
  std::vector<int> readers;
};

struct GraphProfile {
  std::string model;
  std::vector<GraphChain> chains;
  std::vector<GraphEdge> edges;
  // The chains in the order the step runs their forwards (a topological
  // order of the edges); backwards run in the reverse order. Set by
  // ValidateGraphProfile.
  std::vector<int> order;

  int num_chains() const { return static_cast<int>(chains.size()); }
  // Bytes of chain c's output (what an edge from c carries).
  int64_t output_bytes(int c) const { return chains[c].profile.layers.back().output_bytes; }
};

// Checks what a graph needs beyond each chain's ValidateProfile: at least
// one chain, unique names, every chain with layers, edges between distinct
// chains with readers in range, at most one edge per pair, no cycle, and
// what graphs do not model (gradient accumulation above 1, host links,
// pipeline stages). Sets graph->order. `source` names the file.
Status ValidateGraphProfile(GraphProfile* graph, const std::string& source);

// Graph profile JSON -> GraphProfile, validated. Errors name the file and
// the field ("graph.json: edges[1].to: unknown chain 'decodr' (chains:
// encoder, decoder)").
Result<GraphProfile> ParseGraphProfile(std::string_view json_text, const std::string& source);
std::string GraphProfileToJson(const GraphProfile& graph);

// True when `json_text` is a JSON object with a top-level "chains" key (a
// graph profile, valid or not); false for anything else.
bool IsGraphProfileText(std::string_view json_text);

// The graph's total model state: every chain's static bytes.
int64_t GraphStaticBytes(const GraphProfile& graph);

}  // namespace remat

#endif  // REMAT_GRAPH_PROFILE_H_
