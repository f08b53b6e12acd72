// config.json of gemma2, gemma3_text, qwen3, phi3, mixtral and qwen3_moe, read as transformers
// 5.24 reads them: each key absent or null takes the default of the family's
// configuration class, and the layer types follow its __post_init__.
#include "model/hf_families.h"

#include "io/json_fields.h"

namespace remat::internal {
namespace {

constexpr int64_t kMaxHf = int64_t{1} << 24;

// transformers' defaults (configuration_<type>.py) for the keys remat reads.
nlohmann::json Defaults(const std::string& type) {
  if (type == "gemma2" || type == "gemma3_text") {
    const bool g2 = type == "gemma2";
    return {{"vocab_size", g2 ? 256000 : 262208},
            {"hidden_size", 2304},
            {"intermediate_size", 9216},
            {"num_hidden_layers", 26},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 4},
            {"head_dim", 256},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"max_position_embeddings", g2 ? 8192 : 131072},
            {"tie_word_embeddings", true},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"query_pre_attn_scalar", 256},
            {"sliding_window", 4096},
            {"final_logit_softcapping", g2 ? nlohmann::json(30.0) : nlohmann::json()},
            {"attn_logit_softcapping", g2 ? nlohmann::json(50.0) : nlohmann::json()},
            {"sliding_window_pattern", g2 ? 2 : 6},
            {"use_bidirectional_attention", false}};
  }
  if (type == "mixtral") {
    return {{"vocab_size", 32000},
            {"hidden_size", 4096},
            {"intermediate_size", 14336},
            {"num_hidden_layers", 32},
            {"num_attention_heads", 32},
            {"num_key_value_heads", 8},
            {"hidden_act", "silu"},
            {"max_position_embeddings", 4096 * 32},
            {"tie_word_embeddings", false},
            {"attention_dropout", 0.0},
            {"num_experts_per_tok", 2},
            {"num_local_experts", 8},
            {"output_router_logits", false},
            {"router_jitter_noise", 0.0}};
  }
  if (type == "qwen3_moe") {  // Qwen3MoeConfig: qwen3's keys, other sizes, the experts
    nlohmann::json d = Defaults("qwen3");
    d.erase("head_dim");  // no such field: getattr(config, "head_dim", hidden / heads)
    d.update({{"hidden_size", 2048},
              {"intermediate_size", 6144},
              {"num_hidden_layers", 24},
              {"num_key_value_heads", 4},
              {"decoder_sparse_step", 1},
              {"moe_intermediate_size", 768},
              {"num_experts_per_tok", 8},
              {"num_experts", 128},
              {"output_router_logits", false}});
    return d;
  }
  if (type == "qwen3") {
    return {{"vocab_size", 151936},
            {"hidden_size", 4096},
            {"intermediate_size", 22016},
            {"num_hidden_layers", 32},
            {"num_attention_heads", 32},
            {"num_key_value_heads", 32},
            {"head_dim", 128},
            {"hidden_act", "silu"},
            {"max_position_embeddings", 32768},
            {"tie_word_embeddings", false},
            {"attention_bias", false},
            {"use_sliding_window", false},
            {"sliding_window", 4096},
            {"max_window_layers", 28},
            {"attention_dropout", 0.0}};
  }
  return {{"vocab_size", 32064},  // phi3
          {"hidden_size", 3072},
          {"intermediate_size", 8192},
          {"num_hidden_layers", 32},
          {"num_attention_heads", 32},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attention_dropout", 0.0},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 4096},
          {"tie_word_embeddings", false}};
}

// An optional number that null or absent turns off (0).
Status SoftCap(const nlohmann::json& d, const JsonObjectReader& r, const char* key, double* out) {
  if (!d.contains(key) || d[key].is_null()) return Status::Ok();
  return r.Double(key, out, true, 1e-30, 1e30);
}

Status ReadActivation(const JsonObjectReader& r, const std::string& type, ModelConfig* c) {
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  const char* key = gemma ? "hidden_activation" : "hidden_act";
  std::string act;
  REMAT_RETURN_IF_ERROR(r.String(key, &act, true));
  if (act == "silu") {
    c->activation = Activation::kSilu;
  } else if (act == "gelu_pytorch_tanh") {
    c->activation = Activation::kGeluTanh;
  } else {
    return r.Error(key, "unsupported value \"" + act +
                            "\", expected silu or gelu_pytorch_tanh (one ATen kernel each)");
  }
  return Status::Ok();
}

// layer_types as written, else the family's pattern (transformers' __post_init__).
Status LayerTypes(const nlohmann::json& d, const JsonObjectReader& r, const std::string& type,
                  ModelConfig* c) {
  const int64_t n = c->layers;
  int64_t window = 0;
  if (d.contains("sliding_window") && !d["sliding_window"].is_null()) {
    REMAT_RETURN_IF_ERROR(r.Int("sliding_window", &window, true, 1, kMaxHf));
  }
  if (type == "qwen3" || type == "qwen3_moe") {
    bool use = false;
    REMAT_RETURN_IF_ERROR(r.Bool("use_sliding_window", &use, true));
    if (!use) window = 0;
  }
  if (d.contains("layer_types") && !d["layer_types"].is_null()) {
    const nlohmann::json& types = d["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != n) {
      return r.Error("layer_types", "expected an array of " + std::to_string(n) +
                                        " \"sliding_attention\" or \"full_attention\", one "
                                        "per layer");
    }
    for (const nlohmann::json& t : types) {
      if (t != "sliding_attention" && t != "full_attention") {
        return r.Error("layer_types", "expected \"sliding_attention\" or \"full_attention\", got " +
                                          DescribeJsonValue(t));
      }
      c->sliding_layers.push_back(t == "sliding_attention");
    }
  } else if (type == "gemma2" || type == "gemma3_text") {
    int64_t pattern = 0;
    REMAT_RETURN_IF_ERROR(r.Int("sliding_window_pattern", &pattern, true, 1, kMaxHf));
    for (int64_t i = 0; i < n; ++i) c->sliding_layers.push_back((i + 1) % pattern != 0);
  } else if ((type == "qwen3" || type == "qwen3_moe") && window > 0) {
    int64_t first = 0;
    REMAT_RETURN_IF_ERROR(r.Int("max_window_layers", &first, true, 0, kMaxHf));
    for (int64_t i = 0; i < n; ++i) c->sliding_layers.push_back(i >= first);
  } else if ((type == "phi3" || type == "mixtral") && window > 0) {
    c->sliding_layers.assign(static_cast<size_t>(n), true);  // one mask for every layer
  }
  bool any = false;
  for (bool s : c->sliding_layers) any = any || s;
  if (!any) {
    c->sliding_layers.clear();
    window = 0;
  } else if (window == 0) {
    return r.Error("sliding_window", "null, but layer_types has sliding_attention layers; "
                                     "expected the window's size in tokens");
  }
  c->sliding_window = window;
  return Status::Ok();
}

// The experts of mixtral and qwen3_moe: every layer sparse, routed as
// transformers routes (no jitter, no router logits kept for an auxiliary loss).
Status Experts(const nlohmann::json& d, const JsonObjectReader& r, const std::string& type,
               ModelConfig* c) {
  const bool mixtral = type == "mixtral";
  REMAT_RETURN_IF_ERROR(
      r.Int(mixtral ? "num_local_experts" : "num_experts", &c->experts, true, 1, kMaxHf));
  REMAT_RETURN_IF_ERROR(r.Int("num_experts_per_tok", &c->experts_per_token, true, 1, c->experts));
  if (!mixtral) {
    REMAT_RETURN_IF_ERROR(
        r.Int("moe_intermediate_size", &c->expert_ffn_hidden, true, 1, kMaxHf));
    int64_t step = 1;
    REMAT_RETURN_IF_ERROR(r.Int("decoder_sparse_step", &step, true, 1, kMaxHf));
    if (step != 1) {
      return r.Error("decoder_sparse_step", std::to_string(step) +
                                                " is not supported (dense layers between "
                                                "sparse ones); expected 1");
    }
    if (d.contains("mlp_only_layers") && !d["mlp_only_layers"].empty()) {
      return r.Error("mlp_only_layers",
                     "dense layers are not supported; expected [] or null (every layer sparse)");
    }
  } else {
    double jitter = 0;
    REMAT_RETURN_IF_ERROR(r.Double("router_jitter_noise", &jitter, true, 0, 1e30));
    if (jitter > 0) {
      return r.Error("router_jitter_noise", "is not supported (a multiplicative noise in "
                                            "training); expected 0");
    }
  }
  bool aux = false;
  REMAT_RETURN_IF_ERROR(r.Bool("output_router_logits", &aux, true));
  if (aux) {
    return r.Error("output_router_logits",
                   "true is not supported (every layer's router logits kept for the "
                   "load-balancing loss); expected false");
  }
  return Status::Ok();
}

}  // namespace

bool IsHfVariant(const std::string& t) {
  return t == "gemma2" || t == "gemma3_text" || t == "gemma3" || t == "qwen3" || t == "phi3" ||
         t == "mixtral" || t == "qwen3_moe";
}

bool IsHfMixtureOfExperts(const std::string& t) {
  return t == "qwen2_moe" || t == "deepseek_v2" || t == "deepseek_v3" || t == "olmoe" ||
         t == "phimoe" || t == "gpt_oss" || t == "granitemoe" || t == "jamba" || t == "dbrx";
}

Status ParseHfVariant(const std::string& model_type, const nlohmann::json& doc,
                      const std::string& source, ModelConfig* c, double* dropout) {
  std::string type = model_type;
  std::string where = source;
  const nlohmann::json* text = &doc;
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (type == "gemma3") {  // the multimodal model: its decoder is text_config
    type = "gemma3_text";
    where = source + ": text_config";
    text = &kEmpty;
    if (doc.contains("text_config") && !doc["text_config"].is_null()) {
      if (!doc["text_config"].is_object()) {
        return Status::Invalid(source + ": field 'text_config': expected an object, got " +
                               DescribeJsonValue(doc["text_config"]));
      }
      text = &doc["text_config"];
    }
  }
  nlohmann::json d = Defaults(type);
  for (auto it = text->begin(); it != text->end(); ++it) {
    if (!it.value().is_null()) d[it.key()] = it.value();
  }
  if (model_type == "gemma3" && doc.contains("tie_word_embeddings") &&
      doc["tie_word_embeddings"].is_boolean()) {
    d["tie_word_embeddings"] = doc["tie_word_embeddings"];  // Gemma3Config's, for the LM head
  }
  JsonObjectReader r(d, where);
  c->architecture = Architecture::kLlama;
  REMAT_RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->layers, true, 1, kMaxHf));
  REMAT_RETURN_IF_ERROR(r.Int("hidden_size", &c->hidden, true, 1, kMaxHf));
  REMAT_RETURN_IF_ERROR(r.Int("num_attention_heads", &c->heads, true, 1, kMaxHf));
  c->kv_heads = c->heads;
  if (d.contains("num_key_value_heads")) {
    REMAT_RETURN_IF_ERROR(r.Int("num_key_value_heads", &c->kv_heads, true, 1, kMaxHf));
  }
  if (!d.contains("head_dim")) {  // phi3, mixtral, qwen3_moe: getattr(..., hidden / heads)
    if (c->hidden % c->heads != 0) {
      return r.Error("num_attention_heads", std::to_string(c->heads) +
                                                " does not divide hidden_size: the head_dim "
                                                "is hidden_size / num_attention_heads");
    }
    c->head_dim = c->hidden / c->heads;
  } else {
    REMAT_RETURN_IF_ERROR(r.Int("head_dim", &c->head_dim, true, 1, kMaxHf));
  }
  REMAT_RETURN_IF_ERROR(r.Int("intermediate_size", &c->ffn_hidden, true, 1, kMaxHf));
  REMAT_RETURN_IF_ERROR(r.Int("max_position_embeddings", &c->max_position, true, 1, kMaxHf));
  REMAT_RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab, true, 1, kMaxHf));
  REMAT_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c->tie_embeddings, true));
  REMAT_RETURN_IF_ERROR(ReadActivation(r, type, c));
  if (type != "phi3" && type != "mixtral") {
    bool bias = false;
    REMAT_RETURN_IF_ERROR(r.Bool("attention_bias", &bias, true));
    if (bias) {
      return r.Error("attention_bias",
                     "true is not supported (biases on q, k, v and o); expected false");
    }
  }
  REMAT_RETURN_IF_ERROR(r.Double("attention_dropout", dropout, true, 0, 0.999999));
  const bool gemma = type == "gemma2" || type == "gemma3_text";
  if (gemma) {
    bool bidirectional = false;
    REMAT_RETURN_IF_ERROR(r.Bool("use_bidirectional_attention", &bidirectional, true));
    if (bidirectional) {
      return r.Error("use_bidirectional_attention",
                     "true is not supported (an encoder); expected false");
    }
    double scalar = 0;  // scaling = scalar^-0.5: a scalar multiply, nothing kept
    REMAT_RETURN_IF_ERROR(r.Double("query_pre_attn_scalar", &scalar, true, 1e-30, 1e30));
    REMAT_RETURN_IF_ERROR(SoftCap(d, r, "attn_logit_softcapping", &c->attn_softcap));
    REMAT_RETURN_IF_ERROR(SoftCap(d, r, "final_logit_softcapping", &c->logit_softcap));
    c->gemma_norms = true;
    c->embedding_scale = true;
  }
  c->qk_norm = type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text";
  if (type == "mixtral" || type == "qwen3_moe") REMAT_RETURN_IF_ERROR(Experts(d, r, type, c));
  if (type == "phi3") {
    c->fused_projections = true;
    for (const char* key : {"resid_pdrop", "embd_pdrop"}) {
      double p = 0;
      REMAT_RETURN_IF_ERROR(r.Double(key, &p, true, 0, 0.999999));
      if (p > 0) {
        return r.Error(key, std::to_string(p) +
                                " is not supported (remat models phi3's attention dropout "
                                "only); expected 0");
      }
    }
  }
  return LayerTypes(d, r, type, c);
}

}  // namespace remat::internal
