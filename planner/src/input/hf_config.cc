// Hugging Face config.json -> ModelConfig.
//
// The shape comes from the family's keys; the head from `architectures`
// (...ForCausalLM: lm, ...ForMaskedLM: mlm, ...ForSequenceClassification:
// classification, ...Model or none: pooling). An optional "remat" object
// holds model.json fields for the training job and overrides all of that
// (head, pooling, loss, texts_per_example, num_labels, pooler, seq_len,
// micro_batch, ...); the result is checked as a model.json is.
#include <algorithm>
#include <iterator>

#include <nlohmann/json.hpp>

#include "model/hf_families.h"
#include "io/json_fields.h"
#include "model/lora_config.h"
#include "remat/input/input.h"
#include "remat/input/model_types.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::JsonObjectReader;
using internal::LoraKeys;
using internal::ParseJson;
namespace {

constexpr int64_t kMaxHf = int64_t{1} << 24;

// Reads the first key present among `keys`.
Status IntAny(const JsonObjectReader& r, std::initializer_list<const char*> keys, int64_t* out,
              bool required) {
  for (const char* k : keys) {
    if (r.Has(k)) return r.Int(k, out, true, 1, kMaxHf);
  }
  if (!required) return Status::Ok();
  std::string names;
  for (const char* k : keys) names += std::string(names.empty() ? "" : " or ") + "'" + k + "'";
  return Status::Invalid(r.where() + ": missing " + names);
}

// An optional integer that may be null (HF writes "head_dim": null).
Status OptionalInt(const nlohmann::json& doc, const JsonObjectReader& r, const char* key,
                   int64_t min, int64_t* out) {
  if (!doc.contains(key) || doc[key].is_null()) return Status::Ok();
  return r.Int(key, out, false, min, kMaxHf);
}

// The head the model class names: "lm", "mlm", "classification", "pooling".
Result<std::string> HeadFromArchitectures(const nlohmann::json& doc, const std::string& source) {
  if (!doc.contains("architectures") || doc["architectures"].is_null())
    return std::string("pooling");
  const nlohmann::json& a = doc["architectures"];
  if (!a.is_array() || a.empty() || !a[0].is_string()) {
    return Status::Invalid(source +
                           ": field 'architectures': expected an array of class "
                           "names, got " +
                           DescribeJsonValue(a));
  }
  const std::string name = a[0].get<std::string>();
  auto ends = [&](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  // Gemma3ForConditionalGeneration: its decoder's LM head (the vision tower
  // is not modeled).
  if (ends("ForCausalLM") || ends("LMHeadModel") || ends("ForConditionalGeneration")) {
    return std::string("lm");
  }
  if (ends("ForMaskedLM") || ends("ForPreTraining")) return std::string("mlm");
  if (ends("ForSequenceClassification")) return std::string("classification");
  if (ends("Model")) return std::string("pooling");
  return Status::Invalid(source + ": field 'architectures': unsupported class \"" + name +
                         "\", expected ...ForCausalLM, ...ForMaskedLM, "
                         "...ForSequenceClassification or ...Model (or set \"remat\": "
                         "{\"head\": ...})");
}

Status ParseGpt2(const nlohmann::json& doc, const JsonObjectReader& r, ModelConfig* c,
                 double* dropout) {
  c->architecture = Architecture::kGpt;
  REMAT_RETURN_IF_ERROR(IntAny(r, {"n_layer"}, &c->layers, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"n_embd"}, &c->hidden, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"n_head"}, &c->heads, true));
  REMAT_RETURN_IF_ERROR(OptionalInt(doc, r, "n_inner", 1, &c->ffn_hidden));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"n_positions", "n_ctx"}, &c->max_position, true));
  return r.Double("resid_pdrop", dropout, false, 0, 0.999999);
}

Status ParseLlama(const std::string& type, const nlohmann::json& doc, const JsonObjectReader& r,
                  ModelConfig* c, double* dropout) {
  c->architecture = Architecture::kLlama;
  c->tie_embeddings = false;
  c->qkv_bias = type == "qwen2";  // Qwen2Attention: q/k/v with bias, o without
  REMAT_RETURN_IF_ERROR(IntAny(r, {"num_hidden_layers"}, &c->layers, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"hidden_size"}, &c->hidden, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"num_attention_heads"}, &c->heads, true));
  REMAT_RETURN_IF_ERROR(OptionalInt(doc, r, "num_key_value_heads", 1, &c->kv_heads));
  REMAT_RETURN_IF_ERROR(OptionalInt(doc, r, "head_dim", 1, &c->head_dim));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"intermediate_size"}, &c->ffn_hidden, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"max_position_embeddings"}, &c->max_position, true));
  REMAT_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c->tie_embeddings, false));
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    bool on = false;
    REMAT_RETURN_IF_ERROR(r.Bool(key, &on, false));
    if (on) {
      return r.Error(key,
                     "true is not supported (biases on o_proj or the MLP); expected false "
                     "(or write a model.json)");
    }
  }
  REMAT_RETURN_IF_ERROR(r.Double("attention_dropout", dropout, false, 0, 0.999999));
  if (*dropout < 0) *dropout = 0.0;
  return Status::Ok();
}

Status ParseEncoder(const std::string& type, const JsonObjectReader& r, ModelConfig* c,
                    double* dropout) {
  c->architecture = Architecture::kBert;
  c->tie_embeddings = true;
  if (type == "distilbert") {
    bool sinusoidal = false;
    REMAT_RETURN_IF_ERROR(r.Bool("sinusoidal_pos_embds", &sinusoidal, false));
    if (sinusoidal) {
      return r.Error("sinusoidal_pos_embds",
                     "true is not supported (fixed positions); "
                     "expected false");
    }
    REMAT_RETURN_IF_ERROR(IntAny(r, {"n_layers"}, &c->layers, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"dim"}, &c->hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"n_heads"}, &c->heads, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"hidden_dim"}, &c->ffn_hidden, true));
    REMAT_RETURN_IF_ERROR(IntAny(r, {"max_position_embeddings"}, &c->max_position, true));
    c->type_vocab = 0;
    return r.Double("dropout", dropout, false, 0, 0.999999);
  }
  REMAT_RETURN_IF_ERROR(IntAny(r, {"num_hidden_layers"}, &c->layers, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"hidden_size"}, &c->hidden, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"num_attention_heads"}, &c->heads, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"intermediate_size"}, &c->ffn_hidden, true));
  REMAT_RETURN_IF_ERROR(IntAny(r, {"max_position_embeddings"}, &c->max_position, true));
  c->type_vocab = 2;  // BertConfig's default
  REMAT_RETURN_IF_ERROR(r.Int("type_vocab_size", &c->type_vocab, false, 0, kMaxHf));
  return r.Double("hidden_dropout_prob", dropout, false, 0, 0.999999);
}

// Model.json fields a "remat" object may set: the training job and the head.
const std::vector<std::string> kJobKeys = {
    "name",       "seq_len",       "micro_batch",       "grad_accumulation", "precision",
    "grad_dtype", "optimizer",     "attention",         "dropout",           "head",
    "pooling",    "loss",          "texts_per_example", "num_labels",        "pooler",
    "gradients",  "merge_columns", "loss_chunks",       "loss_upcast"};

}  // namespace

bool IsHandWrittenModelType(const std::string& type) {
  return type == "gpt2" || type == "llama" || type == "mistral" || type == "qwen2" ||
         internal::IsHfVariant(type) || type == "bert" || type == "roberta" ||
         type == "xlm-roberta" || type == "distilroberta" || type == "distilbert";
}

Result<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) return Status::Invalid(source + ": expected a JSON object");
  // transformers reads a key set to null as one left out (None: the
  // default); transformers 5 writes "dtype": null, for one.
  for (auto it = doc.begin(); it != doc.end();) {
    it = it.value().is_null() ? doc.erase(it) : std::next(it);
  }
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
  const bool encoder = type == "bert" || type == "roberta" || type == "xlm-roberta" ||
                       type == "distilroberta" || type == "distilbert";
  if (type == "gpt2") {
    REMAT_RETURN_IF_ERROR(ParseGpt2(doc, r, &c, &dropout));
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    REMAT_RETURN_IF_ERROR(ParseLlama(type, doc, r, &c, &dropout));
  } else if (internal::IsHfVariant(type)) {
    REMAT_RETURN_IF_ERROR(internal::ParseHfVariant(type, doc, source, &c, &dropout));
  } else if (encoder) {
    REMAT_RETURN_IF_ERROR(ParseEncoder(type, r, &c, &dropout));
  } else {
    const std::string accepted =
        "expected gpt2, llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, gemma2, gemma3, "
        "gemma3_text, phi3, bert, roberta or distilbert (or write a model.json)";
    if (internal::IsHfMixtureOfExperts(type)) {
      return r.Error("model_type", "\"" + type +
                                       "\" has mixture-of-experts blocks remat does not model "
                                       "(it models mixtral's and qwen3_moe's); " +
                                       accepted);
    }
    return r.Error("model_type", "unsupported value \"" + type + "\", " + accepted);
  }
  if (c.vocab == 0) REMAT_RETURN_IF_ERROR(IntAny(r, {"vocab_size"}, &c.vocab, true));
  if (c.ffn_hidden == 0) c.ffn_hidden = 4 * c.hidden;
  if (dropout >= 0) c.dropout = dropout;
  // Positions beyond what the model learned are meaningless: at most its
  // maximum, and at most the length people train at (kDefaultSeqLen).
  c.seq_len = c.max_position;
  if (encoder && type != "bert" && type != "distilbert") {
    // RoBERTa reserves padding_idx + 1 = 2 position rows: 514 rows -> 512 tokens.
    c.seq_len = std::max<int64_t>(1, c.max_position - 2);
  }
  c.seq_len = std::min(c.seq_len, kDefaultSeqLen);
  std::string dtype;
  REMAT_RETURN_IF_ERROR(r.String("torch_dtype", &dtype, false));
  if (dtype.empty()) REMAT_RETURN_IF_ERROR(r.String("dtype", &dtype, false));
  if (dtype == "bfloat16") c.precision = Precision::kAmpBf16;
  if (dtype == "float16") c.precision = Precision::kAmpFp16;

  // transformers runs these models with SDPA unless the config names another
  // attention implementation; gemma2 with eager (Gemma2PreTrainedModel has
  // no SDPA: it cannot soft-cap the scores).
  c.attention = type == "gemma2" ? AttentionImpl::kEager : AttentionImpl::kSdpa;
  for (const char* key : {"attn_implementation", "_attn_implementation"}) {
    if (!doc.contains(key) || !doc[key].is_string()) continue;
    const std::string impl = doc[key].get<std::string>();
    if (impl == "eager") c.attention = AttentionImpl::kEager;
    if (impl == "sdpa") c.attention = AttentionImpl::kSdpa;
    if (impl.rfind("flash_attention", 0) == 0) c.attention = AttentionImpl::kFlash;
  }

  // The head: the "remat" object's, else the model class's.
  nlohmann::json job = nlohmann::json::object();
  if (doc.contains("remat")) {
    job = doc["remat"];
    if (!job.is_object()) {
      return Status::Invalid(source +
                             ": field 'remat': expected an object of model.json "
                             "fields, got " +
                             DescribeJsonValue(job));
    }
    std::vector<std::string> known = kJobKeys;
    known.insert(known.end(), LoraKeys().begin(), LoraKeys().end());
    REMAT_RETURN_IF_ERROR(JsonObjectReader(job, source + ": remat").NoUnknownKeys(known));
  }
  std::string head;
  if (job.contains("head") && job["head"].is_string()) {
    head = job["head"].get<std::string>();
  } else {
    REMAT_ASSIGN_OR_RETURN(head, HeadFromArchitectures(doc, source));
    if (head == "mlm" && !encoder) head = "lm";
  }
  // AutoModel of bert and roberta loads a pooler (DistilBertModel has none).
  c.pooler = encoder && type != "distilbert" && head == "pooling";
  nlohmann::json merged = nlohmann::json::parse(ModelConfigToJson(c));
  for (const char* key : {"head", "loss", "texts_per_example", "pooler"}) merged.erase(key);
  merged["head"] = head;
  merged["pooler"] = c.pooler;
  // BertForMaskedLM and DistilBertForMaskedLM call CrossEntropyLoss on the
  // 16-bit logits; the other masked-LM classes upcast them (ForMaskedLMLoss).
  if (head == "mlm" && (type == "bert" || type == "distilbert")) merged["loss_upcast"] = false;
  for (auto it = job.begin(); it != job.end(); ++it) merged[it.key()] = it.value();
  return ParseModelConfig(merged.dump(), source);
}

}  // namespace remat
