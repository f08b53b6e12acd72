// Graph profiles for tests: an encoder-decoder, a vision tower feeding a
// language model, the single chain a splice graph equals, and two towers
// meeting in the loss.
#ifndef REMAT_TESTS_TESTING_GRAPHS_H_
#define REMAT_TESTS_TESTING_GRAPHS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "remat/profile/graph_profile.h"
#include "testing/chains.h"

namespace remat::testing {

// Chains `chains` (name, profile) joined by `edges` (from, to, readers),
// validated; a failure fails the test.
inline GraphProfile MakeGraph(std::vector<std::pair<std::string, Profile>> chains,
                              std::vector<GraphEdge> edges) {
  GraphProfile g;
  g.model = "test-graph";
  for (auto& [name, profile] : chains) g.chains.push_back({name, std::move(profile)});
  g.edges = std::move(edges);
  const Status s = ValidateGraphProfile(&g, "test");
  EXPECT_TRUE(s.ok()) << s.message();
  return g;
}

// A vision tower of `v` layers whose output the first layer of a `t`-layer
// language model splices into its sequence; the language model's own batch
// input (token ids) is 0 bytes, so that the graph equals SpliceChain's
// single chain. Random sizes and times (RandomChain), parameter gradients
// made in backward, optimizer workspaces.
inline GraphProfile SpliceGraph(int v, int t, uint32_t seed) {
  Profile vision = WithCreatedGradients(RandomChain(v, seed), seed + 1);
  Profile lm = WithCreatedGradients(RandomChain(t, seed + 2), seed + 3);
  vision.optimizer_workspace_bytes = 7;
  lm.optimizer_workspace_bytes = 11;
  lm.layers[0].input_bytes = 0;
  return MakeGraph({{"vision", std::move(vision)}, {"language", std::move(lm)}},
                   {GraphEdge{0, 1, {0}}});
}

// The single chain a splice graph is: the vision layers, then the language
// model's, its first layer reading the vision output; the model state and
// optimizer workspaces of both.
inline Profile SpliceChain(const GraphProfile& g) {
  Profile vision = g.chains[0].profile;
  const Profile& lm = g.chains[1].profile;
  vision.static_memory.parameter_bytes += lm.static_memory.parameter_bytes;
  vision.optimizer_workspace_bytes += lm.optimizer_workspace_bytes;
  vision.optimizer_ms += lm.optimizer_ms;
  for (LayerProfile l : lm.layers) {
    if (vision.layers.size() == g.chains[0].profile.layers.size()) {
      l.input_bytes = vision.layers.back().output_bytes;
    }
    vision.layers.push_back(l);
  }
  return vision;
}

// An encoder of `e` layers whose output the decoder's blocks 1..d-2 read
// (cross-attention; the decoder's layer 0 is its embedding, d-1 its loss).
inline GraphProfile EncoderDecoderGraph(int e, int d, uint32_t seed) {
  Profile encoder = WithCreatedGradients(RandomChain(e, seed), seed + 1);
  Profile decoder = WithCreatedGradients(RandomChain(d, seed + 2), seed + 3);
  std::vector<int> readers;
  for (int i = 1; i + 1 < d; ++i) readers.push_back(i);
  return MakeGraph({{"encoder", std::move(encoder)}, {"decoder", std::move(decoder)}},
                   {GraphEdge{0, 1, readers}});
}

// Two towers meeting in a contrastive loss: a vision tower of `v` layers
// whose output the last layer (the loss) of a `t`-layer text chain reads.
inline GraphProfile TwoTowersGraph(int v, int t, uint32_t seed) {
  Profile vision = WithCreatedGradients(RandomChain(v, seed), seed + 1);
  Profile text = WithCreatedGradients(RandomChain(t, seed + 2), seed + 3);
  text.optimizer_workspace_bytes = 5;
  return MakeGraph({{"vision", std::move(vision)}, {"text", std::move(text)}},
                   {GraphEdge{0, 1, {t - 1}}});
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_GRAPHS_H_
