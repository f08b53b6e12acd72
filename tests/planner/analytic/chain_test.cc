// Deriving the layer chain from an op graph (Boost.Graph).
#include <gtest/gtest.h>

#include <string>

#include "analytic/chain.h"
#include "analytic/op_graph.h"
#include "analytic/transformer_graph.h"
#include "remat/profile/profile.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

using analytic::BuildTransformerGraph;
using analytic::DeriveChain;
using analytic::LayerReuse;
using analytic::OpGraph;
using analytic::OpInfo;
using analytic::OpTimeModel;

OpInfo MakeOp(const std::string& name, const std::string& layer, std::vector<int> in,
              std::vector<int> out, std::vector<int> saved) {
  OpInfo op;
  op.name = name;
  op.layer = layer;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.saved = std::move(saved);
  op.forward_flops = 1e3;
  op.backward_flops = 2e3;
  return op;
}

// Two residual layers: y = x + f(x). The residual edge (x consumed twice)
// stays inside a layer, so the boundary carries one tensor.
TEST(ChainDerivation, ResidualLayersFormAChain) {
  OpGraph g;
  const int x0 = g.AddTensor("x0", 100);
  const int h1 = g.AddTensor("h1", 400), y1 = g.AddTensor("y1", 100);
  const int h2 = g.AddTensor("h2", 400), y2 = g.AddTensor("y2", 100);
  g.AddOp(MakeOp("f1", "L1", {x0}, {h1}, {x0}));
  g.AddOp(MakeOp("add1", "L1", {x0, h1}, {y1}, {}));
  g.AddOp(MakeOp("f2", "L2", {y1}, {h2}, {y1, h2}));
  g.AddOp(MakeOp("add2", "L2", {y1, h2}, {y2}, {}));
  Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{1e3, 1e3}, {{"L1", "block"}});
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  ASSERT_EQ(chain->size(), 2u);
  EXPECT_EQ((*chain)[0].name, "L1");
  EXPECT_EQ((*chain)[0].kind, "block");
  EXPECT_EQ((*chain)[0].input_bytes, 100);
  EXPECT_EQ((*chain)[0].output_bytes, 100);
  // L1 saves x0 (its input, counted by whoever produced it) and keeps y1: 100.
  EXPECT_EQ((*chain)[0].activation_bytes, 100);
  // While L1 runs, h1 (400) is transient: workspace 400 on top of what it keeps.
  EXPECT_EQ((*chain)[0].forward_workspace_bytes, 400);
  // L2 saves y1 (L1's output: not counted again), h2 and its output y2.
  EXPECT_EQ((*chain)[1].activation_bytes, 500);
  EXPECT_DOUBLE_EQ((*chain)[1].forward_ms, 2.0);
  EXPECT_DOUBLE_EQ((*chain)[1].backward_ms, 4.0);
}

// Backward: autograd frees what an op saved once the op's backward has run.
// x -> f -> h (saved by g) -> g -> s (saved by k) -> k -> y. k's backward
// allocates s's gradient (400) with s still saved: +400; it frees s (-400);
// g allocates h's gradient (400) with h still saved: peak 400 above the
// start, not the 800 of keeping every saved tensor to the end.
TEST(ChainDerivation, BackwardReleasesWhatEachOpSaved) {
  OpGraph g;
  const int x = g.AddTensor("x", 100), h = g.AddTensor("h", 400), s = g.AddTensor("s", 400),
            y = g.AddTensor("y", 100);
  g.AddOp(MakeOp("f", "L1", {x}, {h}, {}));
  g.AddOp(MakeOp("g", "L1", {h}, {s}, {h}));
  g.AddOp(MakeOp("k", "L1", {s}, {y}, {s}));
  Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{1e3, 1e3}, {});
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  ASSERT_EQ(chain->size(), 1u);
  EXPECT_EQ((*chain)[0].activation_bytes, 900);  // h, s and the output y
  // k: +400 (ds) = 400; frees s: 0. g: +400 (dh) = 400; frees ds and h: -400.
  // f: +100 (dx) = -300. Peak 400; minus the input gradient handed on (100).
  EXPECT_EQ((*chain)[0].backward_workspace_bytes, 300);
}

TEST(ChainDerivation, ATensorSkippingALayerIsNotAChain) {
  OpGraph g;
  const int x0 = g.AddTensor("x0", 10), a = g.AddTensor("a", 10), b = g.AddTensor("b", 10),
            c = g.AddTensor("c", 10);
  g.AddOp(MakeOp("f", "L1", {x0}, {a}, {}));
  g.AddOp(MakeOp("g", "L2", {a}, {b}, {}));
  g.AddOp(MakeOp("h", "L3", {b, a}, {c}, {}));  // reads L1's output past L2
  Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{}, {});
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.status().message().find("L3"), std::string::npos) << chain.status().message();
}

// The ops' order is their execution order: an op reading a tensor made by
// itself or by an op added after it leaves no order to run them in.
TEST(ChainDerivation, AnOpReadingWhatItOrALaterOpMakesIsRejected) {
  for (bool itself : {true, false}) {
    OpGraph g;
    const int x = g.AddTensor("x", 10), a = g.AddTensor("a", 10), b = g.AddTensor("b", 10);
    g.AddOp(MakeOp("f", "L1", {x, itself ? a : b}, {a}, {}));
    g.AddOp(MakeOp("g", "L1", {a}, {b}, {}));
    Result<std::vector<LayerProfile>> chain = DeriveChain(g, OpTimeModel{}, {});
    ASSERT_FALSE(chain.ok());
    EXPECT_NE(chain.status().message().find("op 'f' runs before its input is produced"),
              std::string::npos)
        << chain.status().message();
  }
}

// Three residual layers; L3 differs from L2 only in its last op holding
// an earlier op's output through its forward (OpInfo::held): a larger forward
// peak. Deriving like layers once must not hand L3 the figures of L2,
// and L2's copy of L1 must carry its own name.
TEST(ChainDerivation, LayersAlikeButForWhatAnOpHoldsAreDerivedApart) {
  OpGraph g;
  int x = g.AddTensor("x0", 100);
  for (int i = 1; i <= 3; ++i) {
    const std::string l = "L" + std::to_string(i);
    const int h = g.AddTensor("h" + l, 400), u = g.AddTensor("u" + l, 400),
              y = g.AddTensor("y" + l, 100);
    g.AddOp(MakeOp("f" + l, l, {x}, {h}, {x}));
    g.AddOp(MakeOp("g" + l, l, {h}, {u}, {}));
    const int add = g.AddOp(MakeOp("add" + l, l, {x, u}, {y}, {}));
    if (i == 3) g.AddForwardLiveness(add, {h}, 0);
    x = y;
  }
  const OpTimeModel time{1e3, 1e3};
  Result<std::vector<LayerProfile>> reused = DeriveChain(g, time, {{"L2", "block"}});
  Result<std::vector<LayerProfile>> each =
      DeriveChain(g, time, {{"L2", "block"}}, {}, LayerReuse::kNone);
  ASSERT_TRUE(reused.ok() && each.ok());
  Profile a, b;
  a.layers = *reused;
  b.layers = *each;
  EXPECT_EQ(ProfileToJson(a), ProfileToJson(b));
  EXPECT_EQ((*reused)[1].name, "L2");
  EXPECT_EQ((*reused)[1].kind, "block");
  EXPECT_EQ((*reused)[0].kind, "");
  EXPECT_EQ((*reused)[0].forward_workspace_bytes, (*reused)[1].forward_workspace_bytes);
  EXPECT_NE((*reused)[1].forward_workspace_bytes, (*reused)[2].forward_workspace_bytes);
}

// Transformer graphs whose blocks are alike (Llama; a mixture of experts),
// alternate (Gemma 2's sliding and global attention), draw dropout masks
// (BERT), create their gradients in backward (fp32) or train adapters
// (LoRA): the chain derived with like layers shared is the chain derived
// layer by layer, figure for figure.
TEST(ChainDerivation, SharingLikeLayersGivesTheFiguresOfEachDerivedAlone) {
  const std::string llama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama",
      "hidden_size":256,"intermediate_size":688,"num_hidden_layers":4,"num_attention_heads":8,
      "num_key_value_heads":2,"max_position_embeddings":512,"vocab_size":8000})";
  const std::string gemma = R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2",
      "hidden_size":256,"intermediate_size":512,"num_hidden_layers":4,"num_attention_heads":4,
      "num_key_value_heads":2,"head_dim":64,"sliding_window":64,"query_pre_attn_scalar":64,
      "max_position_embeddings":512,"vocab_size":8000})";
  const std::string mixtral = R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral",
      "hidden_size":256,"intermediate_size":512,"num_hidden_layers":3,"num_attention_heads":8,
      "num_key_value_heads":2,"num_local_experts":4,"num_experts_per_tok":2,
      "max_position_embeddings":512,"vocab_size":8000})";
  const std::string bert = R"({"architectures":["BertForMaskedLM"],"model_type":"bert",
      "hidden_size":256,"intermediate_size":1024,"num_hidden_layers":3,"num_attention_heads":4,
      "max_position_embeddings":512,"type_vocab_size":2,"vocab_size":8000})";
  std::vector<ModelConfig> configs;
  for (const std::string* json : {&llama, &gemma, &mixtral, &bert}) {
    ModelConfig c = testing::Hf(*json);
    c.seq_len = 256;
    c.micro_batch = 2;
    configs.push_back(c);
    c.precision = Precision::kMixedBf16;
    configs.push_back(c);
  }
  ModelConfig lora = testing::Hf(llama);
  lora.seq_len = 128;
  lora.lora_rank = 8;
  configs.push_back(lora);
  for (const ModelConfig& c : configs) {
    SCOPED_TRACE(c.name + " " + std::to_string(static_cast<int>(c.precision)));
    Result<analytic::TransformerGraph> tg = BuildTransformerGraph(c);
    ASSERT_TRUE(tg.ok()) << tg.status().message();
    std::set<std::string> creating;
    if (c.precision == Precision::kFp32) {
      for (const auto& [tag, kind] : tg->kinds) creating.insert(tag);
    }
    const OpTimeModel time{1e9, 1e9, 1e9};
    Result<std::vector<LayerProfile>> reused = DeriveChain(tg->graph, time, tg->kinds, creating);
    Result<std::vector<LayerProfile>> each =
        DeriveChain(tg->graph, time, tg->kinds, creating, LayerReuse::kNone);
    ASSERT_TRUE(reused.ok() && each.ok());
    Profile a, b;
    a.layers = *reused;
    b.layers = *each;
    EXPECT_EQ(ProfileToJson(a), ProfileToJson(b));
  }
}

}  // namespace
}  // namespace remat
