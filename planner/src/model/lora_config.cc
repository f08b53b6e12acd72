#include "model/lora_config.h"

#include <cmath>

namespace remat {

using internal::DescribeJsonValue;
using internal::JoinAlternatives;
using internal::JsonObjectReader;
namespace {

// Target names and HF module names (llama and its variants, GPT-2, BERT,
// Phi-3, Mixtral's experts) with their bits. A GPT-2 or BERT name matches
// what PEFT's suffix match finds: "c_proj" is both attn.c_proj and
// mlp.c_proj, "dense" is BERT's attention output, intermediate and output
// dense layers. Mixtral's w1, w3, w2 are the names PEFT converts to its
// experts' gate_up_proj and down_proj; PEFT's "gate" there is the router,
// "router" here ("gate" is the gate projection of every family).
struct TargetName {
  const char* name;
  uint32_t bits;
};
const TargetName kTargetNames[] = {
    {"q", kLoraQ},
    {"k", kLoraK},
    {"v", kLoraV},
    {"o", kLoraO},
    {"gate", kLoraGate},
    {"up", kLoraUp},
    {"down", kLoraDown},
    {"all-linear", kLoraAllLinear},
    {"q_proj", kLoraQ},
    {"k_proj", kLoraK},
    {"v_proj", kLoraV},
    {"o_proj", kLoraO},
    {"gate_proj", kLoraGate},
    {"up_proj", kLoraUp},
    {"down_proj", kLoraDown},
    {"c_attn", kLoraQ | kLoraK | kLoraV},
    {"c_proj", kLoraO | kLoraDown},
    {"c_fc", kLoraUp},
    {"query", kLoraQ},
    {"key", kLoraK},
    {"value", kLoraV},
    {"dense", kLoraO | kLoraUp | kLoraDown},
    {"qkv_proj", kLoraQ | kLoraK | kLoraV},
    {"gate_up_proj", kLoraGate | kLoraUp},
    {"w1", kLoraGate},
    {"w3", kLoraUp},
    {"w2", kLoraDown},
    {"router", kLoraRouter},
};
const char* const kCanonical[] = {"q", "k", "v", "o", "gate", "up", "down", "router"};

const std::vector<std::string> kLoraDtypes = {"default", "fp32", "bf16", "fp16"};
const std::vector<std::string> kQuantizations = {"none", "nf4"};

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const TargetName& t : kTargetNames) names.push_back(t.name);
  return names;
}

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

Result<uint32_t> OneTarget(const std::string& name) {
  for (const TargetName& t : kTargetNames) {
    if (name == t.name) return t.bits;
  }
  return Status::Invalid("unknown LoRA target '" + name + "', expected " +
                         JoinAlternatives(TargetNames()));
}

}  // namespace

const std::vector<std::string>& internal::LoraKeys() {
  static const std::vector<std::string> keys = {"lora_rank",    "lora_alpha", "lora_targets",
                                                "lora_dropout", "lora_dtype", "quantization",
                                                "double_quant"};
  return keys;
}

Result<uint32_t> ParseLoraTargets(std::string_view text) {
  uint32_t bits = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string name =
        Trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (name.empty()) {
      return Status::Invalid("empty LoRA target in '" + std::string(text) + "', expected " +
                             JoinAlternatives(TargetNames()) + ", comma-separated");
    }
    REMAT_ASSIGN_OR_RETURN(const uint32_t b, OneTarget(name));
    bits |= b;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return bits;
}

std::string LoraTargetsToString(uint32_t targets) {
  if (targets == kLoraAllLinear) return "all-linear";
  std::string s;
  for (int i = 0; i < 8; ++i) {
    if (targets & (1u << i)) s += (s.empty() ? "" : ",") + std::string(kCanonical[i]);
  }
  return s;
}

const char* ToString(LoraDtype v) { return kLoraDtypes[static_cast<int>(v)].c_str(); }
const char* ToString(Quantization v) { return kQuantizations[static_cast<int>(v)].c_str(); }

Result<Quantization> ParseQuantization(std::string_view text) {
  for (size_t i = 0; i < kQuantizations.size(); ++i) {
    if (kQuantizations[i] == text) return static_cast<Quantization>(i);
  }
  return Status::Invalid("unknown quantization '" + std::string(text) + "', expected " +
                         JoinAlternatives(kQuantizations));
}

Status internal::ParseLoraFields(const nlohmann::json& doc, const JsonObjectReader& r,
                                 ModelConfig* c) {
  REMAT_RETURN_IF_ERROR(r.Int("lora_rank", &c->lora_rank, false, 0, 1 << 20));
  REMAT_RETURN_IF_ERROR(r.Double("lora_alpha", &c->lora_alpha, false, 1e-9, 1e9));
  REMAT_RETURN_IF_ERROR(r.Double("lora_dropout", &c->lora_dropout, false, 0.0, 0.999999));
  if (r.Has("lora_targets")) {
    const nlohmann::json& v = doc.at("lora_targets");
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_array() && !v.empty()) {
      for (const nlohmann::json& e : v) {
        if (!e.is_string()) {
          return r.Error("lora_targets", "expected names (strings), got " + DescribeJsonValue(e));
        }
        text += (text.empty() ? "" : ",") + e.get<std::string>();
      }
    } else {
      return r.Error("lora_targets", "expected a list of projection names or \"all-linear\", got " +
                                         DescribeJsonValue(v));
    }
    Result<uint32_t> bits = ParseLoraTargets(text);
    if (!bits.ok()) return r.Error("lora_targets", bits.status().message());
    c->lora_targets = *bits;
  }
  std::string dtype = "default", quantization = "none";
  REMAT_RETURN_IF_ERROR(r.Enum("lora_dtype", &dtype,
                               std::vector<std::string>(kLoraDtypes.begin() + 1, kLoraDtypes.end()),
                               false));
  for (size_t i = 0; i < kLoraDtypes.size(); ++i) {
    if (kLoraDtypes[i] == dtype) c->lora_dtype = static_cast<LoraDtype>(i);
  }
  REMAT_RETURN_IF_ERROR(r.Enum("quantization", &quantization, kQuantizations, false));
  c->quantization = *ParseQuantization(quantization);
  return r.Bool("double_quant", &c->double_quant, false);
}

Status internal::ValidateLora(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const char* field, const std::string& what) {
    return Status::Invalid(source + ": field '" + field + "': " + what);
  };
  if (c.lora_rank < 0 || c.lora_rank > (1 << 20)) {
    return bad("lora_rank", "expected an integer in [0, 1048576] (0: no LoRA), got " +
                                std::to_string(c.lora_rank));
  }
  if (c.lora_rank > std::min(c.hidden, c.ffn_hidden)) {
    return bad("lora_rank", std::to_string(c.lora_rank) +
                                " is above the narrowest projection's width " +
                                std::to_string(std::min(c.hidden, c.ffn_hidden)) +
                                " (an adapter of that rank is no low-rank update)");
  }
  if (!(std::isfinite(c.lora_alpha) && c.lora_alpha > 0)) {
    return bad("lora_alpha", "expected a number above 0 (PEFT's default 8)");
  }
  if (!(c.lora_dropout >= 0.0 && c.lora_dropout < 1.0)) {
    return bad("lora_dropout", "expected a number in [0, 1)");
  }
  if (c.lora_rank == 0) {
    const char* set = c.lora_targets != 0                     ? "lora_targets"
                      : c.lora_dropout > 0                    ? "lora_dropout"
                      : c.lora_dtype != LoraDtype::kDefault   ? "lora_dtype"
                      : c.quantization != Quantization::kNone ? "quantization"
                                                              : nullptr;
    if (set != nullptr) {
      return bad(set, "set without lora_rank: adapters need a rank above 0 (--lora-rank 16)");
    }
  }
  if (c.lora_targets & ~static_cast<uint32_t>(kLoraAllLinear)) {
    return bad("lora_targets", "unknown target bits");
  }
  if ((c.lora_targets & kLoraGate) && c.lora_targets != kLoraAllLinear &&
      c.architecture != Architecture::kLlama) {
    return bad("lora_targets", std::string("gate: ") + ToString(c.architecture) +
                                   " has no gate projection (accepted: q, k, v, o, up, down, "
                                   "all-linear)");
  }
  if ((c.lora_targets & kLoraRouter) && c.lora_targets != kLoraAllLinear && c.experts == 0) {
    return bad("lora_targets", "router: a dense model has no router (mixtures of experts only)");
  }
  const uint32_t gate_up = c.lora_targets & (kLoraGate | kLoraUp);
  if (c.experts > 0 && gate_up != 0 && gate_up != (kLoraGate | kLoraUp)) {
    return bad("lora_targets",
               std::string(gate_up == kLoraGate ? "gate" : "up") + " without " +
                   (gate_up == kLoraGate ? "up" : "gate") +
                   ": the experts' gate and up projections are one parameter (gate_up_proj), "
                   "adapted together or not at all, as PEFT requires (accepted: gate,up or "
                   "gate_up_proj; PEFT's \"gate\" of a mixture of experts is its router: "
                   "router)");
  }
  if (c.double_quant && c.quantization != Quantization::kNf4) {
    return bad("double_quant", "true: double quantization needs quantization \"nf4\"");
  }
  return Status::Ok();
}

void internal::LoraToJson(const ModelConfig& c, nlohmann::ordered_json* j) {
  if (c.lora_rank == 0) return;
  (*j)["lora_rank"] = c.lora_rank;
  (*j)["lora_alpha"] = c.lora_alpha;
  (*j)["lora_targets"] =
      LoraTargetsToString(c.lora_targets == 0 ? kLoraQ | kLoraV : c.lora_targets);
  (*j)["lora_dropout"] = c.lora_dropout;
  if (c.lora_dtype != LoraDtype::kDefault) (*j)["lora_dtype"] = ToString(c.lora_dtype);
  (*j)["quantization"] = ToString(c.quantization);
  (*j)["double_quant"] = c.double_quant;
}

}  // namespace remat
