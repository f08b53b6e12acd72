// `planner pareto`: the table, the JSON, and clear errors for bad flags.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

Captured Pareto(std::vector<std::string> args) {
  args.insert(args.begin(), "pareto");
  args.push_back(kExample);
  return RunCli(args);
}

TEST(ParetoCommand, PrintsATableWithEveryStrategy) {
  const Captured o = Pareto({"--points", "3"});
  ASSERT_EQ(o.code, 0) << o.err;
  for (const char* s : {"none", "uniform", "segment", "selective", "optimal-single", "optimal"}) {
    EXPECT_NE(o.out.find(s), std::string::npos) << s;
  }
  EXPECT_NE(o.out.find("32.11 GiB"), std::string::npos);  // keep-everything peak
  // The step's buffers (GPT-2's causal mask) beside the model state, as the
  // plan's report names them.
  EXPECT_NE(o.out.find("(model state 1.85 GiB + buffers 64.00 MiB)"), std::string::npos) << o.out;
}

TEST(ParetoCommand, JsonHasAPointPerBudgetAndStrategy) {
  const Captured o = Pareto({"--points", "4", "--strategies", "uniform,optimal", "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["budgets"].size(), 4u);
  EXPECT_EQ(j["points"].size(), 8u);
  EXPECT_EQ(j["strategies"], nlohmann::json({"uniform", "optimal"}));
  // The lowest budget is the lowest peak: optimal reaches it.
  EXPECT_EQ(j["points"][1]["strategy"], "optimal");
  EXPECT_TRUE(j["points"][1]["fits"].get<bool>());
  EXPECT_GE(j["frontier"]["optimal"].size(), 2u);
}

TEST(ParetoCommand, RejectsBadFlags) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--points", "1"}, "--points"},
           {{"--slots", "1"}, "--slots"},
           {{"--strategies", "auto"}, "cannot be swept"},
           {{"--strategies", "fastest"}, "unknown strategy 'fastest'"},
           {{"--min-budget", "30GB", "--max-budget", "20GB"}, "above --max-budget"},
       }) {
    const Captured o = Pareto(args);
    EXPECT_EQ(o.code, 2) << args[0];
    EXPECT_NE(o.err.find(message), std::string::npos) << o.err;
  }
}

}  // namespace
}  // namespace remat::cli
