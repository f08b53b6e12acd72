#include "remat/model_config.h"

#include <nlohmann/json.hpp>

#include "json_fields.h"
#include "json_values.h"

namespace remat {
namespace {

const std::vector<std::string> kArchitectures = {"gpt", "bert", "llama"};
const std::vector<std::string> kPrecisions = {"fp32", "bf16", "fp16", "amp_bf16", "amp_fp16"};
const std::vector<std::string> kOptimizers = {"adamw", "sgd", "sgd_momentum", "none"};
const std::vector<std::string> kAttention = {"eager", "flash"};
const std::vector<std::string> kKnownKeys = {
    "name",     "architecture", "layers",       "hidden",    "heads",
    "ffn_hidden", "vocab",      "seq_len",      "micro_batch", "max_position",
    "grad_accumulation", "precision", "optimizer", "attention", "dropout",
    "tie_embeddings"};

// Generous limits: anything above is a typo, and keeps byte arithmetic far
// from overflow (see checked_math.h for the rest). Published models have up
// to ~200 blocks; the strategies' budget searches grow with the square of the
// chain (4096 blocks plan in about 25 s, 65536 would take hours).
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxWidth = 1 << 20;
constexpr int64_t kMaxTokens = 1 << 24;

template <typename E>
E FromName(const std::vector<std::string>& names, const std::string& value) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == value) return static_cast<E>(i);
  }
  return static_cast<E>(0);
}

int64_t DefaultFfn(Architecture arch, int64_t hidden) {
  if (arch == Architecture::kLlama) {
    // LLaMA: 2/3 of 4h, rounded up to a multiple of 256 (4096 -> 11008).
    const int64_t raw = 8 * hidden / 3;
    return (raw + 255) / 256 * 256;
  }
  return 4 * hidden;
}

}  // namespace

const char* ToString(Architecture v) { return kArchitectures[static_cast<int>(v)].c_str(); }
const char* ToString(Precision v) { return kPrecisions[static_cast<int>(v)].c_str(); }
const char* ToString(Optimizer v) { return kOptimizers[static_cast<int>(v)].c_str(); }
const char* ToString(AttentionImpl v) { return kAttention[static_cast<int>(v)].c_str(); }

Result<Precision> ParsePrecision(std::string_view text) {
  for (size_t i = 0; i < kPrecisions.size(); ++i) {
    if (kPrecisions[i] == text) return static_cast<Precision>(i);
  }
  return Status::Invalid("unknown precision '" + std::string(text) + "', expected " +
                         JoinAlternatives(kPrecisions));
}

Result<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) {
    return Status::Invalid(source + ": expected a JSON object describing the model, got " +
                           DescribeJsonValue(doc));
  }
  JsonObjectReader r(doc, source);
  REMAT_RETURN_IF_ERROR(r.NoUnknownKeys(kKnownKeys));
  ModelConfig c;
  std::string arch = "gpt", precision = "fp32", optimizer = "adamw", attention = "eager";
  REMAT_RETURN_IF_ERROR(r.String("name", &c.name, false));
  REMAT_RETURN_IF_ERROR(r.Enum("architecture", &arch, kArchitectures, false));
  c.architecture = FromName<Architecture>(kArchitectures, arch);
  REMAT_RETURN_IF_ERROR(r.Int("layers", &c.layers, true, 1, kMaxLayers));
  REMAT_RETURN_IF_ERROR(r.Int("hidden", &c.hidden, true, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("heads", &c.heads, true, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("ffn_hidden", &c.ffn_hidden, false, 1, 16 * kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("vocab", &c.vocab, true, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("seq_len", &c.seq_len, true, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("micro_batch", &c.micro_batch, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("max_position", &c.max_position, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("grad_accumulation", &c.grad_accumulation, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Enum("precision", &precision, kPrecisions, false));
  c.precision = FromName<Precision>(kPrecisions, precision);
  REMAT_RETURN_IF_ERROR(r.Enum("optimizer", &optimizer, kOptimizers, false));
  c.optimizer = FromName<Optimizer>(kOptimizers, optimizer);
  REMAT_RETURN_IF_ERROR(r.Enum("attention", &attention, kAttention, false));
  c.attention = FromName<AttentionImpl>(kAttention, attention);
  REMAT_RETURN_IF_ERROR(r.Double("dropout", &c.dropout, false, 0.0, 0.999999));
  c.tie_embeddings = c.architecture != Architecture::kLlama;
  REMAT_RETURN_IF_ERROR(r.Bool("tie_embeddings", &c.tie_embeddings, false));
  if (c.ffn_hidden == 0) c.ffn_hidden = DefaultFfn(c.architecture, c.hidden);
  if (c.max_position == 0) c.max_position = c.seq_len;
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(c, source));
  return c;
}

Status ValidateModelConfig(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const char* field, const std::string& what) {
    return Status::Invalid(source + ": field '" + field + "': " + what);
  };
  auto in_range = [&](const char* field, int64_t v, int64_t max) {
    return v >= 1 && v <= max ? Status::Ok()
                              : bad(field, "expected an integer in [1, " + std::to_string(max) +
                                               "], got " + std::to_string(v));
  };
  REMAT_RETURN_IF_ERROR(in_range("layers", c.layers, kMaxLayers));
  REMAT_RETURN_IF_ERROR(in_range("hidden", c.hidden, kMaxWidth));
  REMAT_RETURN_IF_ERROR(in_range("heads", c.heads, kMaxWidth));
  if (c.hidden % c.heads != 0) {
    return bad("heads", std::to_string(c.heads) + " does not divide hidden = " +
                            std::to_string(c.hidden) + " (head size must be a whole number)");
  }
  REMAT_RETURN_IF_ERROR(in_range("ffn_hidden", c.ffn_hidden, 16 * kMaxWidth));
  REMAT_RETURN_IF_ERROR(in_range("vocab", c.vocab, kMaxTokens));
  REMAT_RETURN_IF_ERROR(in_range("seq_len", c.seq_len, kMaxTokens));
  REMAT_RETURN_IF_ERROR(in_range("micro_batch", c.micro_batch, kMaxTokens));
  if (c.max_position > kMaxTokens) {  // 0 is fine for llama (no learned positions)
    return bad("max_position", "expected an integer in [1, " + std::to_string(kMaxTokens) + "]");
  }
  REMAT_RETURN_IF_ERROR(in_range("grad_accumulation", c.grad_accumulation, kMaxTokens));
  if (c.architecture != Architecture::kLlama && c.max_position < c.seq_len) {
    return bad("max_position", std::to_string(c.max_position) + " is smaller than seq_len = " +
                                   std::to_string(c.seq_len) +
                                   " (learned positions need one row per token)");
  }
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) return bad("dropout", "expected a number in [0, 1)");
  return Status::Ok();
}

std::string ModelConfigToJson(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["architecture"] = ToString(c.architecture);
  j["layers"] = c.layers;
  j["hidden"] = c.hidden;
  j["heads"] = c.heads;
  j["ffn_hidden"] = c.ffn_hidden;
  j["vocab"] = c.vocab;
  j["seq_len"] = c.seq_len;
  j["micro_batch"] = c.micro_batch;
  j["max_position"] = c.max_position;
  j["grad_accumulation"] = c.grad_accumulation;
  j["precision"] = ToString(c.precision);
  j["optimizer"] = ToString(c.optimizer);
  j["attention"] = ToString(c.attention);
  j["dropout"] = c.dropout;
  j["tie_embeddings"] = c.tie_embeddings;
  return DumpDocument(j);
}

}  // namespace remat
