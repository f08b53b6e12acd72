// plan.json read back (the input of `planner train --plan`): a catalogue of
// bad plan files, each rejected with one message naming the file, the field
// and the value; and the check that a plan is for the model it runs on.
#include "remat/plan_file.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "remat/analytic.h"
#include "remat/report.h"
#include "remat/strategies.h"

namespace remat {
namespace {

ModelConfig SmallGpt(int64_t micro_batch = 2) {
  ModelConfig c;
  c.name = "small-gpt";
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 128;
  c.seq_len = 32;
  c.max_position = 32;
  c.micro_batch = micro_batch;
  return c;
}

Profile ProfileOf(const ModelConfig& c) { return *AnalyticProfile(c, {}); }

std::string PlanText(const Profile& p) {
  PlanOptions o;
  o.strategy = Strategy::kUniform;
  o.every = 1;
  ReportContext ctx;
  ctx.input_path = "small-gpt.json";
  return PlanToJson(*MakePlan(p, o), p, ctx);
}

TEST(PlanFile, RoundTrips) {
  const Profile p = ProfileOf(SmallGpt());
  Result<LoadedPlan> plan = ParsePlanJson(PlanText(p), "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->model, "small-gpt");
  EXPECT_EQ(plan->strategy, "uniform");
  EXPECT_EQ(plan->profile.num_layers(), p.num_layers());
  EXPECT_TRUE(CheckPlanMatchesProfile(*plan, p, "plan.json").ok());
}

// Found by the CLI fuzzer: a file name that is not UTF-8 (Linux allows any
// bytes) made PlanToJson throw (nlohmann type_error 316), an internal error.
TEST(PlanFile, ANonUtf8InputPathIsWrittenWithAReplacementCharacter) {
  const Profile p = ProfileOf(SmallGpt());
  ReportContext ctx;
  ctx.input_path = "caf\xe9.json";
  const std::string text = PlanToJson(*MakePlan(p, PlanOptions{}), p, ctx);
  EXPECT_EQ(nlohmann::json::parse(text)["model"]["input"], "caf\xef\xbf\xbd.json");
  EXPECT_TRUE(ParsePlanJson(text, "plan.json").ok());
  Profile named = p;
  named.model = "\xff";
  EXPECT_TRUE(ParseProfile(ProfileToJson(named), "p.json").ok());
}

struct BadPlan {
  const char* name;
  std::function<std::string(nlohmann::json&, const std::string& text)> make;
  const char* expect;  // substring of the message
};

void PrintTo(const BadPlan& c, std::ostream* os) { *os << c.name; }

class BadPlanFile : public ::testing::TestWithParam<BadPlan> {};

TEST_P(BadPlanFile, IsRejectedWithOneMessageNamingFileAndField) {
  const std::string text = PlanText(ProfileOf(SmallGpt()));
  nlohmann::json doc = nlohmann::json::parse(text);
  const std::string bad = GetParam().make(doc, text);
  Result<LoadedPlan> plan = ParsePlanJson(bad, "plan.json");
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(m.rfind("plan.json", 0), 0u) << m;
  EXPECT_NE(m.find(GetParam().expect), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

// Helpers for the cases: change the document and serialize it.
std::string Dump(const nlohmann::json& j) { return j.dump(); }
int FirstOp(const nlohmann::json& doc, const std::string& op) {
  for (size_t i = 0; i < doc["schedule"].size(); ++i) {
    if (doc["schedule"][i]["op"] == op) return static_cast<int>(i);
  }
  return -1;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, BadPlanFile,
                         ::testing::
                             Values(BadPlan{"truncated",
                                            [](nlohmann::json&, const std::string& t) {
                                              return t.substr(0, t.size() / 2);
                                            },
                                            "plan.json: malformed JSON"},
                                    BadPlan{"empty",
                                            [](nlohmann::json&, const std::string&) {
                                              return std::string();
                                            },
                                            "malformed JSON"},
                                    BadPlan{"array",
                                            [](nlohmann::json&, const std::string&) {
                                              return std::string("[]");
                                            },
                                            "expected a plan object"},
                                    BadPlan{"no_profile",
                                            [](nlohmann::json& d, const std::string&) {
                                              d.erase("profile");
                                              return Dump(d);
                                            },
                                            "field 'profile': missing"},
                                    BadPlan{"profile_type",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["profile"] = 3;
                                              return Dump(d);
                                            },
                                            "field 'profile'"},
                                    BadPlan{"strategy_type",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["strategy"] = 42;
                                              return Dump(d);
                                            },
                                            "field 'strategy': expected a string, got 42"},
                                    BadPlan{
                                        "negative_budget",
                                        [](nlohmann::json& d, const std::string&) {
                                          d["budget_bytes"] = -1;
                                          return Dump(d);
                                        },
                                        "field 'budget_bytes': expected an integer >= 0, got -1"},
                                    BadPlan{"huge_budget",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["budget_bytes"] = 1e30;
                                              return Dump(d);
                                            },
                                            "field 'budget_bytes'"},
                                    BadPlan{"no_schedule",
                                            [](nlohmann::json& d, const std::string&) {
                                              d.erase("schedule");
                                              return Dump(d);
                                            },
                                            "field 'schedule': missing"},
                                    BadPlan{"schedule_type",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["schedule"] = "all";
                                              return Dump(d);
                                            },
                                            "expected an array of schedule ops"},
                                    // The plan's profile lost a layer its schedule runs: the layer
                                    // counts disagree.
                                    BadPlan{"profile_shorter_than_schedule",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["profile"]["layers"].erase(
                                                  d["profile"]["layers"].size() - 1);
                                              return Dump(d);
                                            },
                                            "field 'layer': expected an integer in [0, 4], got 5"},
                                    BadPlan{"profile_longer_than_schedule",
                                            [](nlohmann::json& d, const std::string&) {
                                              nlohmann::json extra = d["profile"]["layers"].back();
                                              extra["name"] = "extra";
                                              extra["input_bytes"] = extra["output_bytes"];
                                              d["profile"]["layers"].push_back(extra);
                                              return Dump(d);
                                            },
                                            "plan.json: schedule op"},
                                    // JSON has no NaN or infinity; an overflowing number is the
                                    // closest.
                                    BadPlan{"infinite_time",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["profile"]["layers"][1]["forward_ms"] = 12345.5;
                                              std::string t = Dump(d);
                                              return t.replace(t.find("12345.5"), 7, "1e999");
                                            },
                                            "plan.json: malformed JSON: number overflow parsing "
                                            "'1e999'"},
                                    BadPlan{"negative_bytes",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["profile"]["layers"][1]["activation_bytes"] = -5;
                                              return Dump(d);
                                            },
                                            "plan.json: profile: layers[1]: field "
                                            "'activation_bytes': expected an integer in [0, "},
                                    BadPlan{"unknown_op",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["schedule"][0]["op"] = "teleport";
                                              return Dump(d);
                                            },
                                            "schedule[0]: field 'op': unknown value \"teleport\""},
                                    BadPlan{"bad_tensor",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["schedule"][FirstOp(d, "free")]["tensor"] = "y3";
                                              return Dump(d);
                                            },
                                            "bad tensor name 'y3'"},
                                    BadPlan{
                                        "not_executable",
                                        [](nlohmann::json& d, const std::string&) {
                                          d["schedule"].erase(FirstOp(d, "forward"));
                                          return Dump(d);
                                        },
                                        "plan.json: schedule op 0"},
                                    BadPlan{"negative_peak",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["predicted"]["peak_bytes"] = -1;
                                              return Dump(d);
                                            },
                                            "plan.json: predicted: field 'peak_bytes'"},
                                    // Used to exhaust the stack in ParsePlanJson (nlohmann's
                                    // recursive dump).
                                    BadPlan{"deep_nesting",
                                            [](nlohmann::json&, const std::string&) {
                                              const int depth = 300000;
                                              return R"({"strategy": "x", "profile": {"static_bytes": 0, "layers": )" +
                                                     std::string(depth, '[') +
                                                     std::string(depth, ']') + "}}";
                                            },
                                            "plan.json: malformed JSON: nested deeper than 64 "
                                            "levels"}),
                         [](const ::testing::TestParamInfo<BadPlan>& info) {
                           return std::string(info.param.name);
                         });

TEST(PlanFile, APlanForAnotherModelIsRejected) {
  const Result<LoadedPlan> plan = ParsePlanJson(PlanText(ProfileOf(SmallGpt())), "plan.json");
  ASSERT_TRUE(plan.ok());
  // Another model with the same chain shape (LLaMA's boundaries match GPT's here).
  ModelConfig llama = SmallGpt();
  llama.architecture = Architecture::kLlama;
  llama.name = "small-llama";
  EXPECT_EQ(CheckPlanMatchesProfile(*plan, ProfileOf(llama), "plan.json").message(),
            "plan.json: the plan was made for 'small-gpt', this is 'small-llama'; make a new "
            "plan for this model (planner --json -o plan.json)");
  // The same name, another shape.
  ModelConfig deeper = SmallGpt();
  deeper.layers = 3;
  EXPECT_EQ(CheckPlanMatchesProfile(*plan, ProfileOf(deeper), "plan.json").message(),
            "plan.json: the plan was made for 'small-gpt', this is 'small-gpt': the plan's chain "
            "has 6 layers (embedding, block0..block1, final_norm, head, loss), the model's 7 "
            "(embedding, block0..block2, final_norm, head, loss); make a new plan for this model "
            "(planner --json -o plan.json)");
}

TEST(PlanFile, APlanForAnotherMicroBatchIsRejected) {
  const Result<LoadedPlan> plan = ParsePlanJson(PlanText(ProfileOf(SmallGpt(2))), "plan.json");
  ASSERT_TRUE(plan.ok());
  const Status s = CheckPlanMatchesProfile(*plan, ProfileOf(SmallGpt(4)), "plan.json");
  EXPECT_EQ(s.message(),
            "plan.json: the plan was made for micro_batch 2, seq_len 32; the model has "
            "micro_batch 4, seq_len 32; make a new plan for this model (planner --json -o "
            "plan.json)");
  // Without the shape fields (a hand-written profile), the tensor sizes tell.
  LoadedPlan unknown_shape = *plan;
  unknown_shape.profile.micro_batch = 0;
  const Status t = CheckPlanMatchesProfile(unknown_shape, ProfileOf(SmallGpt(4)), "plan.json");
  EXPECT_NE(t.message().find("layer 0 ('embedding'): output_bytes is"), std::string::npos)
      << t.message();
}

// A bf16 runtime's loss is a bf16 scalar (2 bytes), the op model's fp32: no
// layer reads it, so a plan from a measured bf16 profile trains the model.
TEST(PlanFile, TheLossScalarsDtypeMayDiffer) {
  const Profile p = ProfileOf(SmallGpt());
  Result<LoadedPlan> plan = ParsePlanJson(PlanText(p), "plan.json");
  ASSERT_TRUE(plan.ok());
  plan->profile.layers.back().output_bytes = 2;
  EXPECT_TRUE(CheckPlanMatchesProfile(*plan, p, "plan.json").ok());
  plan->profile.layers[plan->profile.num_layers() - 2].output_bytes /= 2;  // the head's: refused
  EXPECT_FALSE(CheckPlanMatchesProfile(*plan, p, "plan.json").ok());
}

TEST(PlanFile, MeasuredActivationsAndTimesMayDiffer) {
  const Profile p = ProfileOf(SmallGpt());
  Result<LoadedPlan> plan = ParsePlanJson(PlanText(p), "plan.json");
  ASSERT_TRUE(plan.ok());
  Profile measured = p;
  for (LayerProfile& l : measured.layers) {
    l.activation_bytes += 64;
    l.forward_ms *= 3;
  }
  EXPECT_TRUE(CheckPlanMatchesProfile(*plan, measured, "plan.json").ok());
}

}  // namespace
}  // namespace remat
