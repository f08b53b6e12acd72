// plan.json read back (the input of `planner train --plan`): a catalogue of
// bad plan files, each rejected with one message naming the file, the field
// and the value; and the check that a plan is for the model it runs on.
#include "remat/plan/plan_file.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "remat/analytic/analytic.h"
#include "remat/report/report.h"
#include "remat/strategies/strategies.h"

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

// A plan of a model input, with the job its config describes.
std::string JobPlanText(const ModelConfig& c) {
  const Profile p = ProfileOf(c);
  ReportContext ctx;
  ctx.input_path = "model.json";
  ctx.has_config = true;
  ctx.config = c;
  return PlanToJson(*MakePlan(p, PlanOptions{}), p, ctx);
}

ModelConfig LoraClassifier() {
  ModelConfig c = SmallGpt();
  c.precision = Precision::kMixedBf16;
  c.head = Head::kClassification;
  c.num_labels = 5;
  c.optimizer = Optimizer::kSgdMomentum;
  c.attention = AttentionImpl::kSdpa;
  c.dropout = 0.25;
  c.lora_rank = 8;
  c.lora_targets = kLoraAllLinear;
  c.quantization = Quantization::kNf4;
  c.merge_columns = false;
  return c;
}

void ExpectSameJob(const PlannedJob& a, const PlannedJob& b) {
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.attention, b.attention);
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(a.pooling, b.pooling);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.texts_per_example, b.texts_per_example);
  EXPECT_EQ(a.num_labels, b.num_labels);
  EXPECT_EQ(a.merge_columns, b.merge_columns);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.grad_dtype, b.grad_dtype);
  EXPECT_EQ(a.gradients, b.gradients);
  EXPECT_EQ(a.dropout, b.dropout);
  EXPECT_EQ(a.lora_rank, b.lora_rank);
  EXPECT_EQ(a.lora_targets, b.lora_targets);
  EXPECT_EQ(a.quantization, b.quantization);
  EXPECT_EQ(a.alloc_conf, b.alloc_conf);
}

TEST(PlanFile, TheJobRoundTrips) {
  for (const ModelConfig& c : {SmallGpt(), LoraClassifier()}) {
    Result<LoadedPlan> plan = ParsePlanJson(JobPlanText(c), "plan.json");
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_TRUE(plan->job.has_value());
    ExpectSameJob(*plan->job, PlannedJobOf(c));
  }
}

// --alloc-conf travels in the job, for a run to set PYTORCH_CUDA_ALLOC_CONF.
TEST(PlanFile, TheAllocConfRoundTripsInTheJob) {
  const ModelConfig c = SmallGpt();
  const Profile p = ProfileOf(c);
  ReportContext ctx;
  ctx.input_path = "model.json";
  ctx.has_config = true;
  ctx.config = c;
  PlanOptions o;
  o.device_memory = ResolveDeviceMemory("h200", {}, "expandable_segments:True").value();
  const std::string text = PlanToJson(*MakePlan(p, o), p, ctx);
  EXPECT_EQ(nlohmann::json::parse(text)["job"]["alloc_conf"], "expandable_segments:True");
  Result<LoadedPlan> plan = ParsePlanJson(text, "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(plan->job.has_value());
  EXPECT_EQ(plan->job->alloc_conf, "expandable_segments:True");
  // Without --alloc-conf the job has none.
  EXPECT_FALSE(nlohmann::json::parse(JobPlanText(c))["job"].contains("alloc_conf"));
}

TEST(PlanFile, TheJobIsWrittenResolvedUnderModelJsonsNames) {
  const nlohmann::json job = nlohmann::json::parse(JobPlanText(LoraClassifier()))["job"];
  EXPECT_EQ(job["precision"], "mixed_bf16");
  EXPECT_EQ(job["attention"], "sdpa");
  EXPECT_EQ(job["head"], "classification");
  EXPECT_EQ(job["loss"], "cross_entropy");  // the default, resolved
  EXPECT_EQ(job["texts_per_example"], 1);
  EXPECT_EQ(job["num_labels"], 5);
  EXPECT_EQ(job["optimizer"], "sgd_momentum");
  EXPECT_EQ(job["grad_dtype"], "fp32");       // mixed_bf16's default
  EXPECT_EQ(job["gradients"], "persistent");  // mixed_bf16's default
  EXPECT_EQ(job["dropout"], 0.25);
  EXPECT_EQ(job["lora_rank"], 8);
  EXPECT_EQ(job["lora_targets"], LoraTargetsToString(kLoraAllLinear));
  EXPECT_EQ(job["quantization"], "nf4");
  EXPECT_EQ(job["merge_columns"], false);
  EXPECT_FALSE(job.contains("pooling"));  // not the pooling head
  const nlohmann::json lm = nlohmann::json::parse(JobPlanText(SmallGpt()))["job"];
  EXPECT_EQ(lm["head"], "lm");
  EXPECT_EQ(lm["grad_dtype"], "fp32");
  EXPECT_EQ(lm["gradients"], "created_in_backward");
  EXPECT_FALSE(lm.contains("num_labels"));
  EXPECT_FALSE(lm.contains("lora_targets"));  // no LoRA rank
}

TEST(PlanFile, APlanWithoutAJobLoads) {
  // A profile's plan carries none (its sizes are measured); the field is optional.
  Result<LoadedPlan> plan = ParsePlanJson(PlanText(ProfileOf(SmallGpt())), "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->job.has_value());
  EXPECT_EQ(plan->profile.micro_batch, 2);
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
                                    BadPlan{"job_precision",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["job"]["precision"] = "fp8";
                                              return Dump(d);
                                            },
                                            "plan.json: job: field 'precision'"},
                                    BadPlan{"job_dropout",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["job"]["dropout"] = 1.5;
                                              return Dump(d);
                                            },
                                            "plan.json: job: field 'dropout'"},
                                    BadPlan{"job_lora_targets",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["job"]["lora_targets"] = "q,z";
                                              return Dump(d);
                                            },
                                            "plan.json: job: field 'lora_targets'"},
                                    BadPlan{"job_alloc_conf",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["job"]["alloc_conf"] = "max_split_size_mb:8";
                                              return Dump(d);
                                            },
                                            "plan.json: job: field 'alloc_conf': allocator "
                                            "config: max_split_size_mb:8"},
                                    BadPlan{"job_unknown_field",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["job"]["seq_len"] = 64;
                                              return Dump(d);
                                            },
                                            "plan.json: job: unknown field 'seq_len'"},
                                    BadPlan{"job_not_an_object",
                                            [](nlohmann::json& d, const std::string&) {
                                              d["job"] = "amp_bf16";
                                              return Dump(d);
                                            },
                                            "plan.json: job: expected an object"},
                                    // Deep enough to exhaust the stack of nlohmann's
                                    // recursive dump; ParseJson refuses it before parsing.
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
