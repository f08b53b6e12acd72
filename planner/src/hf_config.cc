// Hugging Face config.json -> ModelConfig.
#include <nlohmann/json.hpp>

#include "json_fields.h"
#include "remat/input.h"

namespace remat {
namespace {

// Reads the first key present among `keys`.
Status IntAny(const JsonObjectReader& r, std::initializer_list<const char*> keys, int64_t* out,
              bool required) {
  for (const char* k : keys) {
    if (r.Has(k)) return r.Int(k, out, true, 1, int64_t{1} << 24);
  }
  if (!required) return Status::Ok();
  std::string names;
  for (const char* k : keys) names += std::string(names.empty() ? "" : " or ") + "'" + k + "'";
  return Status::Invalid(r.where() + ": missing " + names);
}

}  // namespace

Result<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) return Status::Invalid(source + ": expected a JSON object");
  JsonObjectReader r(doc, source);
  std::string type;
  REMAT_RETURN_IF_ERROR(r.String("model_type", &type, true));
  ModelConfig c;
  c.name = type;
  if (doc.contains("_name_or_path") && doc["_name_or_path"].is_string() &&
      !doc["_name_or_path"].get<std::string>().empty()) {
    c.name = doc["_name_or_path"].get<std::string>();
  }
  double dropout = -1;
  if (type == "gpt2") {
    c.architecture = Architecture::kGpt;
    REMAT_RETURN_IF_ERROR(IntAny(r, {"n_layer"}, &c.layers, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"n_embd"}, &c.hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"n_head"}, &c.heads, true));
    if (doc.contains("n_inner") && !doc["n_inner"].is_null()) {
      REMAT_RETURN_IF_ERROR(IntAny(r, {"n_inner"}, &c.ffn_hidden, true));
    }
    REMAT_RETURN_IF_ERROR(IntAny(r, {"n_positions", "n_ctx"}, &c.max_position, true));
    REMAT_RETURN_IF_ERROR(r.Double("resid_pdrop", &dropout, false, 0, 0.999999));
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    c.architecture = Architecture::kLlama;
    c.tie_embeddings = false;
    REMAT_RETURN_IF_ERROR(IntAny(r, {"num_hidden_layers"}, &c.layers, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"hidden_size"}, &c.hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"num_attention_heads"}, &c.heads, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"intermediate_size"}, &c.ffn_hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"max_position_embeddings"}, &c.max_position, true));
    REMAT_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_embeddings, false));
    REMAT_RETURN_IF_ERROR(r.Double("attention_dropout", &dropout, false, 0, 0.999999));
    if (dropout < 0) dropout = 0.0;
  } else if (type == "bert" || type == "roberta" || type == "distilroberta" ||
             type == "xlm-roberta") {
    c.architecture = Architecture::kBert;
    REMAT_RETURN_IF_ERROR(IntAny(r, {"num_hidden_layers"}, &c.layers, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"hidden_size"}, &c.hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"num_attention_heads"}, &c.heads, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"intermediate_size"}, &c.ffn_hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"max_position_embeddings"}, &c.max_position, true));
    REMAT_RETURN_IF_ERROR(r.Double("hidden_dropout_prob", &dropout, false, 0, 0.999999));
  } else {
    return r.Error("model_type", "unsupported value \"" + type +
                                     "\", expected gpt2, llama, mistral, qwen2, bert or roberta "
                                     "(or write a model.json)");
  }
  REMAT_RETURN_IF_ERROR(IntAny(r, {"vocab_size"}, &c.vocab, true));
  if (c.ffn_hidden == 0) c.ffn_hidden = 4 * c.hidden;
  if (dropout >= 0) c.dropout = dropout;
  // Positions beyond what the model learned are meaningless: train at its maximum.
  c.seq_len = c.max_position;
  if (c.architecture == Architecture::kBert && type != "bert") {
    // RoBERTa reserves padding_idx + 1 = 2 position rows: 514 rows -> 512 tokens.
    c.seq_len = std::max<int64_t>(1, c.max_position - 2);
  }
  std::string dtype;
  REMAT_RETURN_IF_ERROR(r.String("torch_dtype", &dtype, false));
  if (dtype == "bfloat16") c.precision = Precision::kAmpBf16;
  if (dtype == "float16") c.precision = Precision::kAmpFp16;
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(c, source));
  return c;
}

}  // namespace remat
