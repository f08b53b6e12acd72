#include "remat/profile/graph_profile.h"

#include <gtest/gtest.h>

#include <string>

namespace remat {
namespace {

std::string Chain(const std::string& name, int layers, int64_t output = 8) {
  std::string l;
  for (int i = 0; i < layers; ++i) {
    l += std::string(i ? "," : "") + "{\"name\":\"l" + std::to_string(i) +
         "\",\"forward_ms\":1,\"backward_ms\":2,\"input_bytes\":" + (i ? "8" : "4") +
         ",\"output_bytes\":" + (i + 1 == layers ? std::to_string(output) : "8") +
         ",\"activation_bytes\":20,\"forward_workspace_bytes\":0,\"backward_workspace_bytes\":0}";
  }
  return "{\"name\":\"" + name + "\",\"profile\":{\"model\":\"" + name +
         "\",\"source\":\"test\",\"static_bytes\":100,\"layers\":[" + l + "]}}";
}

std::string Graph(const std::string& edges) {
  return "{\"model\":\"t\",\"chains\":[" + Chain("encoder", 2, 16) + "," + Chain("decoder", 3) +
         "],\"edges\":[" + edges + "]}";
}

std::string Error(const std::string& text) {
  Result<GraphProfile> g = ParseGraphProfile(text, "g.json");
  EXPECT_FALSE(g.ok());
  if (g.ok()) return "";
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidInput);
  return g.status().message();
}

TEST(GraphProfile, ParsesChainsEdgesAndOrder) {
  Result<GraphProfile> g =
      ParseGraphProfile(Graph(R"({"from":"encoder","to":"decoder","readers":[1,2]})"), "g.json");
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->num_chains(), 2);
  EXPECT_EQ(g->chains[1].name, "decoder");
  EXPECT_EQ(g->chains[1].profile.num_layers(), 3);
  ASSERT_EQ(g->edges.size(), 1u);
  EXPECT_EQ(g->edges[0].readers, (std::vector<int>{1, 2}));
  EXPECT_EQ(g->order, (std::vector<int>{0, 1}));
  EXPECT_EQ(g->output_bytes(0), 16);
  EXPECT_EQ(GraphStaticBytes(*g), 200);
}

TEST(GraphProfile, RoundTripsThroughJson) {
  Result<GraphProfile> g =
      ParseGraphProfile(Graph(R"({"from":"encoder","to":"decoder","readers":[0]})"), "g.json");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string text = GraphProfileToJson(*g);
  Result<GraphProfile> again = ParseGraphProfile(text, "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(GraphProfileToJson(*again), text);
}

TEST(GraphProfile, TellsGraphsFromSingleChains) {
  EXPECT_TRUE(IsGraphProfileText(Graph("")));
  EXPECT_FALSE(IsGraphProfileText(R"({"layers":[],"static_bytes":0})"));
  EXPECT_FALSE(IsGraphProfileText("[1,2]"));
  EXPECT_FALSE(IsGraphProfileText("not json"));
}

TEST(GraphProfile, RejectsUnknownChainReferences) {
  const std::string m = Error(Graph(R"({"from":"encoder","to":"decodr","readers":[1]})"));
  EXPECT_NE(
      m.find("g.json: edges[0]: field 'to': unknown chain 'decodr' (chains: encoder, decoder)"),
      std::string::npos)
      << m;
}

TEST(GraphProfile, RejectsCycles) {
  const std::string m = Error(Graph(R"({"from":"encoder","to":"decoder","readers":[1]},)"
                                    R"({"from":"decoder","to":"encoder","readers":[0]})"));
  EXPECT_NE(m.find("the chains encoder, decoder read each other's outputs in a cycle"),
            std::string::npos)
      << m;
  EXPECT_NE(Error(Graph(R"({"from":"encoder","to":"encoder","readers":[0]})"))
                .find("cannot read its own output"),
            std::string::npos);
}

TEST(GraphProfile, RejectsMissingAndBadFields) {
  EXPECT_NE(Error(Graph(R"({"from":"encoder","to":"decoder"})"))
                .find("edges[0]: field 'readers': missing"),
            std::string::npos);
  EXPECT_NE(Error(Graph(R"({"to":"decoder","readers":[1]})")).find("edges[0]: field 'from'"),
            std::string::npos);
  EXPECT_NE(Error(Graph(R"({"from":"encoder","to":"decoder","readers":[3]})"))
                .find("field 'readers': layer 3 is not a layer of chain 'decoder' (0..2)"),
            std::string::npos);
  EXPECT_NE(
      Error(Graph(R"({"from":"encoder","to":"decoder","readers":[2,1]})")).find("ascending unique"),
      std::string::npos);
  EXPECT_NE(
      Error(R"({"chains":[{"name":"a"}]})").find("g.json: chains[0]: field 'profile': missing"),
      std::string::npos);
  EXPECT_NE(Error(R"({"chains":[]})").find("at least one chain"), std::string::npos);
  EXPECT_NE(Error("{\"chains\":[" + Chain("a", 1) + "," + Chain("a", 1) + "]}")
                .find("chains[1]: field 'name': 'a' names two chains"),
            std::string::npos);
  EXPECT_NE(Error(R"({"chains":[],"edge":[]})").find("edge"), std::string::npos);
  // A chain's profile errors name where the chain is.
  const std::string bad =
      "{\"chains\":[{\"name\":\"a\",\"profile\":{\"static_bytes\":0,\"layers\":[{\"name\":\"x\","
      "\"input_bytes\":-1}]}}]}";
  EXPECT_NE(Error(bad).find("g.json: chains[0]: profile"), std::string::npos) << Error(bad);
}

}  // namespace
}  // namespace remat
