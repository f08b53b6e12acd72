// planner --budget SIZE graph.json: a graph profile planned per chain; bad
// graphs exit 2 with one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kGraph[] = REMAT_SOURCE_DIR "/examples/graphs/encoder-decoder.json";

// The example with its edges replaced.
std::string WithEdges(const std::string& edges) {
  nlohmann::json g = nlohmann::json::parse(ReadAll(kGraph));
  g["edges"] = nlohmann::json::parse(edges);
  return g.dump();
}

void ExpectOneLineError(const Captured& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
}

TEST(GraphPlanCommand, PlansEachChain) {
  const Captured none = RunCli({kGraph});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_NE(none.out.find("encoder (6 layers): nothing checkpointed"), std::string::npos)
      << none.out;
  const Captured r = RunCli({"--budget", "3GiB", kGraph});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("forward encoder -> decoder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  decoder (8 layers): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("read by 4 layers of decoder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("predicted: peak "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", fits"), std::string::npos) << r.out;
}

TEST(GraphPlanCommand, PrintsJson) {
  const Captured r = RunCli({"--budget", "3GiB", "--format", "json", kGraph});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["chains"].size(), 2u);
  EXPECT_EQ(j["chains"][1]["name"], "decoder");
  EXPECT_EQ(j["chains"][1]["decisions"].size(), 8u);
  EXPECT_EQ(j["chains"][1]["layer_names"].size(), 8u);
  EXPECT_EQ(j["chains"][1]["input_bytes"].size(), 8u);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_LE(j["peak_bytes"].get<int64_t>(), int64_t{3} << 30);
  EXPECT_LE(j["step_ms"].get<double>(), j["independent"]["step_ms"].get<double>() +
                                            (j["independent"]["fits"].get<bool>() ? 0 : 1e9));
}

TEST(GraphPlanCommand, NoPlanFitsExitsThree) {
  const Captured r = RunCli({"--budget", "100MiB", kGraph});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("no graph plan fits 100.00 MiB"), std::string::npos) << r.err;
}

TEST(GraphPlanCommand, MalformedGraphsExitTwoWithOneLine) {
  ScratchDir dir;
  dir.Write("cycle.json", WithEdges(R"([{"from": "encoder", "to": "decoder", "readers": [1]},
                                        {"from": "decoder", "to": "encoder", "readers": [1]}])"));
  dir.Write("unknown.json",
            WithEdges(R"([{"from": "encoder", "to": "decoder2", "readers": [1]}])"));
  dir.Write("missing.json", WithEdges(R"([{"from": "encoder", "to": "decoder"}])"));
  dir.Write("range.json", WithEdges(R"([{"from": "encoder", "to": "decoder", "readers": [9]}])"));
  dir.Write("no_chains.json", R"({"chains": 3})");
  ExpectOneLineError(RunCli({"--budget", "3GiB", dir.Path("cycle.json")}),
                     "read each other's outputs in a cycle");
  ExpectOneLineError(RunCli({"--budget", "3GiB", dir.Path("unknown.json")}),
                     "edges[0]: field 'to': unknown chain 'decoder2' (chains: encoder, decoder)");
  ExpectOneLineError(RunCli({"--budget", "3GiB", dir.Path("missing.json")}),
                     "field 'readers': missing (required)");
  ExpectOneLineError(RunCli({"--budget", "3GiB", dir.Path("range.json")}),
                     "layer 9 is not a layer of chain 'decoder' (0..7)");
  ExpectOneLineError(RunCli({"--budget", "3GiB", dir.Path("no_chains.json")}),
                     "no_chains.json: field 'chains': expected an array");
  ExpectOneLineError(RunCli({"--budget", "3GiB", "--micro-batch", "2", kGraph}),
                     "option --micro-batch applies to single chains");
  ExpectOneLineError(RunCli({"--budget", "3GiB", "--strategy", "optimal", kGraph}),
                     "option --strategy: a graph profile takes none or uniform");
  ExpectOneLineError(RunCli({"--strategy", "none", "--every", "2", kGraph}),
                     "option --every applies to --strategy uniform");
}

TEST(GraphPlanCommand, EveryChainUniformOrNone) {
  // --strategy uniform --every 1: every block of each chain checkpointed;
  // --strategy none: the plan that checkpoints nothing.
  const Captured uniform =
      RunCli({"--strategy", "uniform", "--every", "1", "--format", "json", kGraph});
  ASSERT_EQ(uniform.code, 0) << uniform.err;
  const nlohmann::json u = nlohmann::json::parse(uniform.out);
  for (const nlohmann::json& chain : u["chains"]) {
    int checkpointed = 0, recomputes = 0;
    for (const nlohmann::json& d : chain["decisions"]) checkpointed += d != "keep";
    for (const nlohmann::json& op : chain["schedule"]) recomputes += op["op"] == "recompute";
    EXPECT_GT(checkpointed, 0) << chain;
    EXPECT_GT(recomputes, 0) << chain;
  }
  EXPECT_LT(u["peak_bytes"].get<int64_t>(), u["baseline"]["peak_bytes"].get<int64_t>());
  EXPECT_GT(u["recompute_ms"].get<double>(), 0);
  const Captured none = RunCli({"--strategy", "none", "--format", "json", kGraph});
  ASSERT_EQ(none.code, 0) << none.err;
  const nlohmann::json n = nlohmann::json::parse(none.out);
  EXPECT_EQ(n["peak_bytes"], n["baseline"]["peak_bytes"]);
  EXPECT_EQ(n["recompute_ms"].get<double>(), 0);
}

}  // namespace
}  // namespace remat::cli
