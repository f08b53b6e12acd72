// model.json's enum names: ToString and the Parse* functions of
// remat/model/model_config.h over the tables of model_config_names.h.
#include "model/model_config_names.h"

#include "io/json_fields.h"
#include "remat/model/model_config.h"

namespace remat {
namespace internal {

const std::vector<std::string> kArchitectures = {"gpt", "bert", "llama"};
const std::vector<std::string> kPrecisions = {"fp32",     "bf16",       "fp16",      "amp_bf16",
                                              "amp_fp16", "mixed_bf16", "mixed_fp16"};
const std::vector<std::string> kGradDtypes = {"default", "fp32", "bf16", "fp16"};
const std::vector<std::string> kGradients = {"default", "created_in_backward", "persistent"};
const std::vector<std::string> kOptimizers = {"adamw",     "sgd",  "sgd_momentum", "none",
                                               "adafactor", "muon", "adamw8bit",
                                               "paged_adamw8bit", "torchao_adamw8bit",
                                               "torchao_adamw4bit", "torchao_adamw_fp8"};
const std::vector<std::string> kAttention = {"eager", "flash", "sdpa"};
const std::vector<std::string> kLrSchedules = {"constant", "linear", "cosine"};
const std::vector<std::string> kHeads = {"default", "lm", "mlm", "pooling", "classification"};
const std::vector<std::string> kPoolings = {"mean", "cls"};
const std::vector<std::string> kLosses = {"default", "cross_entropy", "mnrl"};
const std::vector<std::string> kActivations = {"silu", "gelu_tanh"};
const std::vector<std::string> kLayerTypes = {"full_attention", "sliding_attention"};

std::vector<std::string> Accepted(const std::vector<std::string>& names) {
  return std::vector<std::string>(names.begin() + 1, names.end());  // without "default"
}

}  // namespace internal

using internal::Accepted;
using internal::JoinAlternatives;
using internal::kActivations;
using internal::kArchitectures;
using internal::kAttention;
using internal::kGradDtypes;
using internal::kGradients;
using internal::kHeads;
using internal::kLosses;
using internal::kLrSchedules;
using internal::kOptimizers;
using internal::kPoolings;
using internal::kPrecisions;
namespace {

// `text` as one of `names` (an enum's values in order), or what is accepted.
template <typename E>
Result<E> ParseName(const std::vector<std::string>& names, std::string_view text,
                    const char* what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  return Status::Invalid(std::string("unknown ") + what + " '" + std::string(text) +
                         "', expected " + JoinAlternatives(names));
}

// The same for an enum whose first value, "default", files never name.
template <typename E>
Result<E> ParseNamedNotDefault(const std::vector<std::string>& names, std::string_view text,
                               const char* what) {
  Result<E> v = ParseName<E>(Accepted(names), text, what);
  if (!v.ok()) return v.status();
  return static_cast<E>(static_cast<int>(*v) + 1);  // Accepted drops "default"
}

}  // namespace

const char* ToString(Architecture v) { return kArchitectures[static_cast<int>(v)].c_str(); }
const char* ToString(Precision v) { return kPrecisions[static_cast<int>(v)].c_str(); }
const char* ToString(GradDtype v) { return kGradDtypes[static_cast<int>(v)].c_str(); }
const char* ToString(Gradients v) { return kGradients[static_cast<int>(v)].c_str(); }
const char* ToString(Optimizer v) { return kOptimizers[static_cast<int>(v)].c_str(); }
const char* ToString(AttentionImpl v) { return kAttention[static_cast<int>(v)].c_str(); }
const char* ToString(LrSchedule v) { return kLrSchedules[static_cast<int>(v)].c_str(); }
const char* ToString(Head v) { return kHeads[static_cast<int>(v)].c_str(); }
const char* ToString(Pooling v) { return kPoolings[static_cast<int>(v)].c_str(); }
const char* ToString(Loss v) { return kLosses[static_cast<int>(v)].c_str(); }
const char* ToString(Activation v) { return kActivations[static_cast<int>(v)].c_str(); }

Result<Precision> ParsePrecision(std::string_view text) {
  return ParseName<Precision>(kPrecisions, text, "precision");
}

Result<AttentionImpl> ParseAttention(std::string_view text) {
  return ParseName<AttentionImpl>(kAttention, text, "attention");
}

Result<Head> ParseHead(std::string_view text) {
  return ParseNamedNotDefault<Head>(kHeads, text, "head");
}

Result<Pooling> ParsePooling(std::string_view text) {
  return ParseName<Pooling>(kPoolings, text, "pooling");
}

Result<Loss> ParseLoss(std::string_view text) {
  return ParseNamedNotDefault<Loss>(kLosses, text, "loss");
}

Result<Optimizer> ParseOptimizer(std::string_view text) {
  return ParseName<Optimizer>(kOptimizers, text, "optimizer");
}

Result<GradDtype> ParseGradDtype(std::string_view text) {
  return ParseNamedNotDefault<GradDtype>(kGradDtypes, text, "grad_dtype");
}

Result<Gradients> ParseGradients(std::string_view text) {
  return ParseNamedNotDefault<Gradients>(kGradients, text, "gradients");
}

}  // namespace remat
