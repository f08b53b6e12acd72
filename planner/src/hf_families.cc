// config.json of gemma2, gemma3_text, qwen3 and phi3, read as transformers
// 5.24 reads them: each key absent or null takes the default of the family's
// configuration class, and the layer types follow its __post_init__.
#include "hf_families.h"

#include "json_fields.h"

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
  if (type == "qwen3") {
    return {{"vocab_size", 151936},
            {"hidden_size", 4096},
            {"intermediate_size", 22016},
            {"num_hidden_layers", 32},
            {"num_attention_heads", 32},
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
  const char* key = type == "qwen3" || type == "phi3" ? "hidden_act" : "hidden_activation";
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
  if (type == "qwen3") {
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
  } else if (type == "qwen3" && window > 0) {
    int64_t first = 0;
    REMAT_RETURN_IF_ERROR(r.Int("max_window_layers", &first, true, 0, kMaxHf));
    for (int64_t i = 0; i < n; ++i) c->sliding_layers.push_back(i >= first);
  } else if (type == "phi3" && window > 0) {
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

}  // namespace

bool IsHfVariant(const std::string& t) {
  return t == "gemma2" || t == "gemma3_text" || t == "gemma3" || t == "qwen3" || t == "phi3";
}

bool IsHfMixtureOfExperts(const std::string& t) {
  return t == "mixtral" || t == "qwen3_moe" || t == "qwen2_moe" || t == "deepseek_v2" ||
         t == "deepseek_v3" || t == "olmoe" || t == "phimoe" || t == "gpt_oss";
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
  if (type == "phi3") {
    if (c->hidden % c->heads != 0) {
      return r.Error("num_attention_heads", std::to_string(c->heads) +
                                                " does not divide hidden_size: phi3's head_dim "
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
  if (type != "phi3") {
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
  c->qk_norm = type == "qwen3" || type == "gemma3_text";
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
