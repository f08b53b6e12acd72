#include "remat/profile/profile.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "remat/input/input.h"
#include "testing/chains.h"

namespace remat {
namespace {

TEST(Profile, JsonRoundTrip) {
  const Profile p = testing::TransformerChain(3);
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ProfileToJson(*back), ProfileToJson(p));
  EXPECT_EQ(back->layers[1].selective.size(), 1u);
  EXPECT_EQ(back->static_bytes(), p.static_bytes());
}

TEST(Profile, GradientsAndInputsKeptRoundTrip) {
  Profile p = testing::TransformerChain(3);
  p.layers[1].gradient_bytes = 1000;
  p.layers[1].accumulate_workspace_bytes = 1500;
  p.layers.back().keeps_input = false;
  p.grad_accumulation = 4;
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->layers[1].gradient_bytes, 1000);
  EXPECT_EQ(back->layers[1].accumulate_workspace_bytes, 1500);
  EXPECT_EQ(back->layers[0].accumulate_workspace_bytes, -1);  // absent
  EXPECT_EQ(back->layers[0].accumulating_workspace_bytes(),
            back->layers[0].backward_workspace_bytes);
  EXPECT_FALSE(back->layers.back().keeps_input);
  EXPECT_TRUE(back->layers[1].keeps_input);
  EXPECT_EQ(back->grad_accumulation, 4);
  EXPECT_EQ(back->total_gradient_bytes(), p.static_memory.gradient_bytes + 1000);
  // The first layer's input is the batch: always kept.
  p.layers.back().keeps_input = true;
  p.layers[0].keeps_input = false;
  Result<Profile> bad = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layers[0] ('"), std::string::npos);
  EXPECT_NE(bad.status().message().find("field 'keeps_input'"), std::string::npos);
}

TEST(Profile, BackwardWorkspaceIsSignedDownToWhatTheLayerSaved) {
  Profile p = testing::TransformerChain(3);
  LayerProfile& l = p.layers[1];
  l.backward_workspace_bytes = -(l.activation_bytes - l.output_bytes);
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->layers[1].backward_workspace_bytes, l.backward_workspace_bytes);
  // A backward releases at most what its layer saved besides its output.
  l.backward_workspace_bytes -= 1;
  const Status bad = ParseProfile(ProfileToJson(p), "p.json").status();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("layers[1]"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("backward_workspace_bytes"), std::string::npos) << bad.message();
}

// A compiled profile's backward after a recompute (docs/compile.md): read,
// written back, absent where not given, signed and bounded as the other.
TEST(Profile, RecomputeBackwardWorkspaceRoundTripsAndIsBounded) {
  Profile p = testing::TransformerChain(3);
  LayerProfile& l = p.layers[1];
  l.recompute_backward_workspace_bytes = -(l.activation_bytes - l.output_bytes);
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->layers[1].recompute_backward_workspace_bytes,
            l.recompute_backward_workspace_bytes);
  EXPECT_EQ(back->layers[1].backward_workspace_for(true), *l.recompute_backward_workspace_bytes);
  EXPECT_EQ(back->layers[1].backward_workspace_for(false), l.backward_workspace_bytes);
  EXPECT_FALSE(back->layers[0].recompute_backward_workspace_bytes.has_value());
  EXPECT_EQ(back->layers[0].backward_workspace_for(true), back->layers[0].backward_workspace_bytes);
  *l.recompute_backward_workspace_bytes -= 1;
  const Status bad = ParseProfile(ProfileToJson(p), "p.json").status();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("layers[1]"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("'recompute_backward_workspace_bytes'"), std::string::npos)
      << bad.message();
}

TEST(Profile, MinimalHandWrittenChain) {
  Result<Profile> p = ParseProfile(R"({"static_bytes": 100, "layers": [
      {"name":"a","forward_ms":1,"backward_ms":2,"input_bytes":10,"output_bytes":10,
       "activation_bytes":30,"forward_workspace_bytes":0,"backward_workspace_bytes":0,
       "measured_by":"hand"}]})",
                                   "chain.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->static_memory.parameter_bytes, 100);  // no breakdown given
  EXPECT_EQ(p->layers[0].nograd_workspace_bytes(), 0);
}

std::string Message(const char* json) {
  Result<Profile> p = ParseProfile(json, "x.json");
  EXPECT_FALSE(p.ok()) << json;
  return p.ok() ? "" : p.status().message();
}

// The step's buffers (an eager decoder's causal mask) are static memory
// read and written with the rest, and not model state.
TEST(Profile, BuffersRoundTripAndAreNotModelState) {
  Profile p = testing::TransformerChain(3);
  p.static_memory.buffer_bytes = 4096;
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->static_memory.buffer_bytes, 4096);
  EXPECT_EQ(back->static_bytes(), p.static_bytes());
  const int64_t created = back->total_gradient_bytes() - back->static_memory.gradient_bytes;
  EXPECT_EQ(back->model_state_bytes() + 4096, back->static_bytes() + created);
  nlohmann::json j = nlohmann::json::parse(ProfileToJson(p));
  j["static_bytes"] = j["static_bytes"].get<int64_t>() - 1;
  Result<Profile> bad = ParseProfile(j.dump(), "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("buffer_bytes"), std::string::npos);
}

TEST(Profile, BadInputNamesFileAndField) {
  const char* layer_ok = R"("forward_ms":1,"backward_ms":2,"input_bytes":10,"output_bytes":10,
                            "forward_workspace_bytes":0,"backward_workspace_bytes":0)";
  EXPECT_NE(Message(R"({"static_bytes": 1, "layers": []})").find("empty"), std::string::npos);
  EXPECT_NE(Message(R"({"layers": []})").find("'static_bytes': missing"), std::string::npos);
  EXPECT_NE(Message(R"({"static_bytes": 1, "layers": [{"name":"a"}]})").find("layers[0]"),
            std::string::npos);
  std::string m = Message((std::string(R"({"static_bytes": 1, "layers": [{"name":"a",)") +
                           layer_ok + R"(,"activation_bytes":5}]})")
                              .c_str());
  EXPECT_NE(m.find("activation_bytes"), std::string::npos) << m;
  m = Message((std::string(R"({"static_bytes": 1, "layers": [{"name":"a",)") + layer_ok +
               R"(,"activation_bytes":-5}]})")
                  .c_str());
  EXPECT_NE(m.find("x.json: layers[0]: field 'activation_bytes'"), std::string::npos) << m;
  m = Message(R"({"static_bytes": 1, "layers": [
      {"name":"a","forward_ms":1,"backward_ms":2,"input_bytes":10,"output_bytes":10,
       "activation_bytes":10,"forward_workspace_bytes":0,"backward_workspace_bytes":0},
      {"name":"b","forward_ms":1,"backward_ms":2,"input_bytes":11,"output_bytes":10,
       "activation_bytes":10,"forward_workspace_bytes":0,"backward_workspace_bytes":0}]})");
  EXPECT_NE(m.find("previous layer's output_bytes"), std::string::npos) << m;
  EXPECT_NE(Message("{\"static_bytes\": 1, \"layers\": [").find("malformed JSON"),
            std::string::npos);
  EXPECT_NE(Message("[1,2]").find("expected a profile object"), std::string::npos);
  m = Message((std::string(R"({"static_bytes": 1, "layers": [{"name":"a",)") + layer_ok +
               R"(,"activation_bytes":"lots"}]})")
                  .c_str());
  EXPECT_NE(m.find("got \"lots\""), std::string::npos) << m;
  m = Message((std::string(R"({"static_bytes": 1, "layers": [{"name":"a",)") + layer_ok +
               R"(,"activation_bytes":4611686018427387903},{"name":"b",)" + layer_ok +
               R"(,"activation_bytes":4611686018427387903}]})")
                  .c_str());
  EXPECT_NE(m.find("4 EiB"), std::string::npos) << m;
}

// ParsePlannerInput reads a profile from the document it parsed to tell
// the input's kind (ProfileFromJson): the same profile as ParseProfile, and
// the same message for a bad one.
TEST(Profile, PlannerInputReadsTheSameProfile) {
  Profile p = testing::TransformerChain(3);
  p.layers.back().keeps_input = false;
  const std::string text = ProfileToJson(p);
  Result<PlannerInput> in = ParsePlannerInput(text, "p.json");
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->kind, PlannerInput::Kind::kProfile);
  EXPECT_EQ(ProfileToJson(in->profile), ProfileToJson(*ParseProfile(text, "p.json")));
  const std::string bad = R"({"static_bytes": 1, "layers": [{"name":"a"}]})";
  Result<PlannerInput> bad_in = ParsePlannerInput(bad, "x.json");
  ASSERT_FALSE(bad_in.ok());
  EXPECT_EQ(bad_in.status().message(), ParseProfile(bad, "x.json").status().message());
}

TEST(Profile, BlockLayersPreferBlocks) {
  EXPECT_EQ(BlockLayers(testing::TransformerChain(3)), (std::vector<int>{1, 2, 3}));
  Profile plain = testing::UniformChain(3);
  for (LayerProfile& l : plain.layers) l.kind.clear();
  EXPECT_EQ(BlockLayers(plain), (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace remat
