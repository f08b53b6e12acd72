#include "remat/profile/profile.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "profile/profile_json.h"
#include "remat/io/checked_math.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::DumpDocument;
using internal::JsonObjectReader;
using internal::ParseJson;
using internal::ProfileFromJson;
using internal::ProfileJsonValue;
namespace {

constexpr double kMaxMs = 1e12;  // 30 years: anything above is a broken file
// A layer's relative time spread, (Q3 - Q1) / median: any finite
// non-negative value is a measurement (a microsecond layer on a busy
// machine can report 50); the cap only keeps sums finite.
constexpr double kMaxSpread = 1e6;
// Micro-batches a pipeline stage can hold in flight (a step's micro-batches
// times the virtual stages bound it; far beyond any real schedule).
constexpr int64_t kMaxInFlight = 1'000'000;

// The same range ParseProfile accepts, so that every valid profile (an
// analytic one included) can be written and read back.
bool TimeOk(double ms) { return std::isfinite(ms) && ms >= 0 && ms <= kMaxMs; }

Status ParseSelective(const nlohmann::json& j, const std::string& where, SelectiveOption* out) {
  if (!j.is_object()) {
    return Status::Invalid(where + ": expected an object, got " + DescribeJsonValue(j));
  }
  JsonObjectReader r(j, where);
  REMAT_RETURN_IF_ERROR(r.String("name", &out->name, true));
  REMAT_RETURN_IF_ERROR(r.Int("activation_bytes", &out->activation_bytes, true, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Double("extra_recompute_ms", &out->extra_recompute_ms, true, 0, kMaxMs));
  REMAT_RETURN_IF_ERROR(
      r.Int("recompute_workspace_bytes", &out->recompute_workspace_bytes, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(
      r.Int("forward_workspace_bytes", &out->forward_workspace_bytes, false, 0, kMaxBytes));
  return Status::Ok();
}

Status ParseLayer(const nlohmann::json& j, const std::string& where, LayerProfile* out) {
  if (!j.is_object()) {
    return Status::Invalid(where + ": expected an object, got " + DescribeJsonValue(j));
  }
  JsonObjectReader r(j, where);
  REMAT_RETURN_IF_ERROR(r.String("name", &out->name, true));
  REMAT_RETURN_IF_ERROR(r.String("kind", &out->kind, false));
  REMAT_RETURN_IF_ERROR(r.String("attention_backend", &out->attention_backend, false));
  const std::string& backend = out->attention_backend;
  if (!backend.empty() && backend != "math" && backend != "flash" && backend != "efficient" &&
      backend != "cudnn") {
    return r.Error("attention_backend",
                   "expected math, flash, efficient or cudnn, got '" + backend + "'");
  }
  REMAT_RETURN_IF_ERROR(r.Double("forward_ms", &out->forward_ms, true, 0, kMaxMs));
  REMAT_RETURN_IF_ERROR(r.Double("backward_ms", &out->backward_ms, true, 0, kMaxMs));
  REMAT_RETURN_IF_ERROR(r.Int("input_bytes", &out->input_bytes, true, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Int("output_bytes", &out->output_bytes, true, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Int("activation_bytes", &out->activation_bytes, true, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(
      r.Int("forward_workspace_bytes", &out->forward_workspace_bytes, true, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Int("forward_nograd_workspace_bytes",
                              &out->forward_nograd_workspace_bytes, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(
      r.Int("backward_workspace_bytes", &out->backward_workspace_bytes, true, -kMaxBytes, kMaxBytes));
  if (j.contains("recompute_backward_workspace_bytes")) {
    int64_t bytes = 0;
    REMAT_RETURN_IF_ERROR(
        r.Int("recompute_backward_workspace_bytes", &bytes, true, -kMaxBytes, kMaxBytes));
    out->recompute_backward_workspace_bytes = bytes;
  }
  REMAT_RETURN_IF_ERROR(r.Int("skip_bytes", &out->skip_bytes, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Int("gradient_bytes", &out->gradient_bytes, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(
      r.Int("accumulate_workspace_bytes", &out->accumulate_workspace_bytes, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Bool("keeps_input", &out->keeps_input, false));
  REMAT_RETURN_IF_ERROR(r.Double("time_spread", &out->time_spread, false, 0, kMaxSpread));
  REMAT_RETURN_IF_ERROR(r.Int("in_flight_microbatches", &out->in_flight_microbatches, false, 1,
                              kMaxInFlight));
  REMAT_RETURN_IF_ERROR(
      r.Int("recompute_gather_bytes", &out->recompute_gather_bytes, false, 0, kMaxBytes));
  if (j.contains("selective")) {
    const nlohmann::json& s = j.at("selective");
    if (!s.is_array()) {
      return r.Error("selective", "expected an array of options, got " + DescribeJsonValue(s));
    }
    for (size_t k = 0; k < s.size(); ++k) {
      SelectiveOption opt;
      REMAT_RETURN_IF_ERROR(
          ParseSelective(s[k], where + ".selective[" + std::to_string(k) + "]", &opt));
      out->selective.push_back(std::move(opt));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateProfile(const Profile& p, const std::string& source) {
  if (p.layers.empty()) {
    return Status::Invalid(source +
                           ": field 'layers': the chain is empty, expected at least one layer");
  }
  // model.json allows 4096 blocks; the strategies' searches grow with the
  // square of the chain (8192 layers plan in about 2 minutes under a tight
  // budget), so a much longer chain would plan for hours.
  if (p.layers.size() > 8192) {
    return Status::Invalid(source + ": field 'layers': " + std::to_string(p.layers.size()) +
                           " layers, at most 8192 are supported");
  }
  const StaticMemory& s = p.static_memory;
  if (s.parameter_bytes < 0 || s.gradient_bytes < 0 || s.optimizer_bytes < 0 ||
      s.buffer_bytes < 0) {
    return Status::Invalid(source + ": field 'static_bytes': must not be negative");
  }
  if (!TimeOk(p.optimizer_ms)) {
    return Status::Invalid(source + ": field 'optimizer_ms': must be in [0, 1e12] ms");
  }
  if (p.optimizer_workspace_bytes < 0) {
    return Status::Invalid(source + ": field 'optimizer_workspace_bytes': must not be negative");
  }
  if (p.grad_accumulation < 1) {
    return Status::Invalid(source + ": field 'grad_accumulation': must be at least 1, got " +
                           std::to_string(p.grad_accumulation));
  }
  if (p.accumulate_ms != -1 && !TimeOk(p.accumulate_ms)) {
    return Status::Invalid(source + ": field 'accumulate_ms': must be in [0, 1e12] ms");
  }
  CheckedInt total = CheckedInt(s.parameter_bytes) + s.gradient_bytes + s.optimizer_bytes +
                     s.buffer_bytes + p.optimizer_workspace_bytes;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const LayerProfile& l = p.layers[i];
    const std::string where = source + ": layers[" + std::to_string(i) + "] ('" + l.name + "')";
    if (l.name.empty()) return Status::Invalid(where + ": field 'name': must not be empty");
    if (!TimeOk(l.forward_ms) || !TimeOk(l.backward_ms)) {
      return Status::Invalid(where + ": times must be in [0, 1e12] ms, got forward " +
                             std::to_string(l.forward_ms) + ", backward " +
                             std::to_string(l.backward_ms));
    }
    if (l.input_bytes < 0 || l.output_bytes < 0 || l.activation_bytes < 0 ||
        l.forward_workspace_bytes < 0 || l.skip_bytes < 0) {
      return Status::Invalid(where + ": byte counts must not be negative");
    }
    const int64_t saved = l.activation_bytes - l.output_bytes;
    if (l.backward_workspace_bytes < -saved) {
      return Status::Invalid(where + ": field 'backward_workspace_bytes' (" +
                             std::to_string(l.backward_workspace_bytes) + ") is below -" +
                             std::to_string(saved) +
                             "; a backward releases at most what its layer saved besides its "
                             "output (activation_bytes - output_bytes)");
    }
    if (l.recompute_backward_workspace_bytes && *l.recompute_backward_workspace_bytes < -saved) {
      return Status::Invalid(where + ": field 'recompute_backward_workspace_bytes' (" +
                             std::to_string(*l.recompute_backward_workspace_bytes) +
                             ") is below -" + std::to_string(saved) +
                             "; a backward releases at most what its layer saved besides its "
                             "output (activation_bytes - output_bytes)");
    }
    if (l.activation_bytes < l.output_bytes) {
      return Status::Invalid(where + ": field 'activation_bytes' (" +
                             std::to_string(l.activation_bytes) +
                             ") is smaller than 'output_bytes' (" + std::to_string(l.output_bytes) +
                             "); activation_bytes includes the layer's output");
    }
    if (l.in_flight_microbatches < 1 || l.in_flight_microbatches > kMaxInFlight) {
      return Status::Invalid(where + ": field 'in_flight_microbatches': must be in [1, 1000000], " +
                             "got " + std::to_string(l.in_flight_microbatches));
    }
    if (!(l.time_spread >= 0 && l.time_spread <= kMaxSpread)) {
      return Status::Invalid(where + ": field 'time_spread': must be in [0, 1e6], got " +
                             std::to_string(l.time_spread));
    }
    if (i == 0 && !l.keeps_input) {
      return Status::Invalid(where + ": field 'keeps_input': false for the first layer, whose " +
                             "input is the batch (the loss reads its targets from it)");
    }
    if (i > 0 && l.input_bytes != p.layers[i - 1].output_bytes) {
      return Status::Invalid(where + ": field 'input_bytes' (" + std::to_string(l.input_bytes) +
                             ") differs from the previous layer's output_bytes (" +
                             std::to_string(p.layers[i - 1].output_bytes) +
                             "); a chain passes one tensor from layer to layer");
    }
    for (size_t k = 0; k < l.selective.size(); ++k) {
      const SelectiveOption& o = l.selective[k];
      if (o.activation_bytes < l.output_bytes) {
        return Status::Invalid(where + ": selective[" + std::to_string(k) +
                               "]: activation_bytes is smaller than the layer's output_bytes");
      }
      if (!TimeOk(o.extra_recompute_ms)) {
        return Status::Invalid(where + ": selective[" + std::to_string(k) +
                               "]: extra_recompute_ms must be in [0, 1e12] ms");
      }
      total += CheckedInt(o.recompute_workspace_bytes);
    }
    // Bounds everything the simulator can hold live at once, so its sums
    // cannot overflow: x[i] and g[i] (input_bytes each), what the layer keeps
    // (a selective option's activations replace the layer's: the larger
    // counts) and every workspace.
    int64_t kept = l.activation_bytes;
    for (const SelectiveOption& o : l.selective) kept = std::max(kept, o.activation_bytes);
    total += CheckedInt(l.input_bytes) * 2 + kept + l.gradient_bytes + l.forward_workspace_bytes +
             std::max<int64_t>({0, l.backward_workspace_bytes, l.accumulate_workspace_bytes,
                                l.recompute_backward_workspace_bytes.value_or(0)}) +
             std::max<int64_t>(0, l.forward_nograd_workspace_bytes);
    total += CheckedInt(l.skip_bytes) * 2;  // the side output and its gradient
    // The other micro-batches in flight hold at most the layer's input and
    // what it keeps each.
    total += (CheckedInt(l.input_bytes) + kept) * (l.in_flight_microbatches - 1);
    if (!total.ok()) {
      return Status::Invalid(where + ": byte counts add up past 4 EiB; not a real profile");
    }
  }
  return Status::Ok();
}

Result<Profile> ParseProfile(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(const nlohmann::json doc, ParseJson(json_text, source));
  return ProfileFromJson(doc, source);
}

Result<Profile> internal::ProfileFromJson(const nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object()) {
    return Status::Invalid(source + ": expected a profile object with a 'layers' array, got " +
                           DescribeJsonValue(doc));
  }
  JsonObjectReader r(doc, source);
  Profile p;
  REMAT_RETURN_IF_ERROR(r.String("model", &p.model, false));
  REMAT_RETURN_IF_ERROR(r.String("source", &p.source, false));
  REMAT_RETURN_IF_ERROR(r.String("device", &p.device, false));
  REMAT_RETURN_IF_ERROR(r.Int("parameters", &p.parameters, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Int("micro_batch", &p.micro_batch, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Int("seq_len", &p.seq_len, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Double("optimizer_ms", &p.optimizer_ms, false, 0, kMaxMs));
  REMAT_RETURN_IF_ERROR(
      r.Int("optimizer_workspace_bytes", &p.optimizer_workspace_bytes, false, 0, kMaxBytes));
  REMAT_RETURN_IF_ERROR(r.Double("accumulate_ms", &p.accumulate_ms, false, 0, kMaxMs));
  REMAT_RETURN_IF_ERROR(r.Int("grad_accumulation", &p.grad_accumulation, false, 1, kMaxBytes));
  if (doc.contains("host_link")) {
    const nlohmann::json& h = doc.at("host_link");
    if (!h.is_object()) {
      return r.Error("host_link", "expected an object, got " + DescribeJsonValue(h));
    }
    JsonObjectReader hr(h, source + ": host_link");
    REMAT_RETURN_IF_ERROR(hr.String("name", &p.host_link.name, false));
    REMAT_RETURN_IF_ERROR(hr.Double("gb_per_s", &p.host_link.gb_per_s, true, 1e-6, 1e6));
    REMAT_RETURN_IF_ERROR(hr.Double("latency_us", &p.host_link.latency_us, false, 0, 1e9));
    REMAT_RETURN_IF_ERROR(hr.Bool("overlapped", &p.host_link.overlapped, false));
    REMAT_RETURN_IF_ERROR(hr.NoUnknownKeys({"name", "gb_per_s", "latency_us", "overlapped"}));
  }
  if (doc.contains("provenance")) {
    REMAT_RETURN_IF_ERROR(
        ParseProvenance(doc.at("provenance"), source + ": provenance", &p.provenance));
  }
  int64_t static_bytes = 0;
  REMAT_RETURN_IF_ERROR(r.Int("static_bytes", &static_bytes, true, 0, kMaxBytes));
  if (doc.contains("static")) {
    const nlohmann::json& s = doc.at("static");
    if (!s.is_object()) return r.Error("static", "expected an object, got " + DescribeJsonValue(s));
    JsonObjectReader sr(s, source + ": static");
    REMAT_RETURN_IF_ERROR(
        sr.Int("parameter_bytes", &p.static_memory.parameter_bytes, true, 0, kMaxBytes));
    REMAT_RETURN_IF_ERROR(
        sr.Int("gradient_bytes", &p.static_memory.gradient_bytes, true, 0, kMaxBytes));
    REMAT_RETURN_IF_ERROR(
        sr.Int("optimizer_bytes", &p.static_memory.optimizer_bytes, true, 0, kMaxBytes));
    REMAT_RETURN_IF_ERROR(
        sr.Int("buffer_bytes", &p.static_memory.buffer_bytes, false, 0, kMaxBytes));
    if (p.static_memory.total() != static_bytes) {
      return r.Error("static",
                     "parameter_bytes + gradient_bytes + optimizer_bytes + buffer_bytes = " +
                         std::to_string(p.static_memory.total()) +
                         " differs from static_bytes = " + std::to_string(static_bytes));
    }
  } else {
    // No breakdown given: attribute all model state to parameters.
    p.static_memory.parameter_bytes = static_bytes;
  }
  if (!doc.contains("layers")) return r.Error("layers", "missing (required)");
  const nlohmann::json& layers = doc.at("layers");
  if (!layers.is_array()) {
    return r.Error("layers", "expected an array of layers, got " + DescribeJsonValue(layers));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerProfile l;
    REMAT_RETURN_IF_ERROR(
        ParseLayer(layers[i], source + ": layers[" + std::to_string(i) + "]", &l));
    p.layers.push_back(std::move(l));
  }
  REMAT_RETURN_IF_ERROR(ValidateProfile(p, source));
  return p;
}

nlohmann::ordered_json internal::ProfileJsonValue(const Profile& p) {
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["source"] = p.source;
  if (!p.device.empty()) j["device"] = p.device;
  j["parameters"] = p.parameters;
  if (p.micro_batch > 0) j["micro_batch"] = p.micro_batch;
  if (p.seq_len > 0) j["seq_len"] = p.seq_len;
  j["static_bytes"] = p.static_bytes();
  j["static"] = {{"parameter_bytes", p.static_memory.parameter_bytes},
                 {"gradient_bytes", p.static_memory.gradient_bytes},
                 {"optimizer_bytes", p.static_memory.optimizer_bytes}};
  if (p.static_memory.buffer_bytes > 0) j["static"]["buffer_bytes"] = p.static_memory.buffer_bytes;
  j["optimizer_ms"] = p.optimizer_ms;
  if (p.optimizer_workspace_bytes > 0) j["optimizer_workspace_bytes"] = p.optimizer_workspace_bytes;
  if (p.accumulate_ms >= 0) j["accumulate_ms"] = p.accumulate_ms;
  if (p.grad_accumulation > 1) j["grad_accumulation"] = p.grad_accumulation;
  if (p.host_link.present()) {
    j["host_link"] = {{"name", p.host_link.name},
                      {"gb_per_s", p.host_link.gb_per_s},
                      {"latency_us", p.host_link.latency_us},
                      {"overlapped", p.host_link.overlapped}};
  }
  if (p.provenance.present()) j["provenance"] = ProvenanceJson(p.provenance);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerProfile& l : p.layers) {
    nlohmann::ordered_json lj;
    lj["name"] = l.name;
    if (!l.kind.empty()) lj["kind"] = l.kind;
    if (!l.attention_backend.empty()) lj["attention_backend"] = l.attention_backend;
    lj["forward_ms"] = l.forward_ms;
    lj["backward_ms"] = l.backward_ms;
    lj["input_bytes"] = l.input_bytes;
    lj["output_bytes"] = l.output_bytes;
    lj["activation_bytes"] = l.activation_bytes;
    lj["forward_workspace_bytes"] = l.forward_workspace_bytes;
    if (l.forward_nograd_workspace_bytes >= 0) {
      lj["forward_nograd_workspace_bytes"] = l.forward_nograd_workspace_bytes;
    }
    lj["backward_workspace_bytes"] = l.backward_workspace_bytes;
    if (l.recompute_backward_workspace_bytes) {
      lj["recompute_backward_workspace_bytes"] = *l.recompute_backward_workspace_bytes;
    }
    if (l.skip_bytes > 0) lj["skip_bytes"] = l.skip_bytes;
    if (l.gradient_bytes > 0) lj["gradient_bytes"] = l.gradient_bytes;
    if (l.accumulate_workspace_bytes >= 0) {
      lj["accumulate_workspace_bytes"] = l.accumulate_workspace_bytes;
    }
    if (!l.keeps_input) lj["keeps_input"] = false;
    if (l.time_spread > 0) lj["time_spread"] = l.time_spread;
    if (l.in_flight_microbatches != 1) lj["in_flight_microbatches"] = l.in_flight_microbatches;
    if (l.recompute_gather_bytes > 0) lj["recompute_gather_bytes"] = l.recompute_gather_bytes;
    if (!l.selective.empty()) {
      nlohmann::ordered_json opts = nlohmann::ordered_json::array();
      for (const SelectiveOption& o : l.selective) {
        nlohmann::ordered_json oj;
        oj["name"] = o.name;
        oj["activation_bytes"] = o.activation_bytes;
        oj["extra_recompute_ms"] = o.extra_recompute_ms;
        oj["recompute_workspace_bytes"] = o.recompute_workspace_bytes;
        if (o.forward_workspace_bytes >= 0)
          oj["forward_workspace_bytes"] = o.forward_workspace_bytes;
        opts.push_back(oj);
      }
      lj["selective"] = opts;
    }
    layers.push_back(lj);
  }
  j["layers"] = layers;
  return j;
}

std::string ProfileToJson(const Profile& p) { return DumpDocument(ProfileJsonValue(p)); }

std::vector<int> BlockLayers(const Profile& p) {
  std::vector<int> blocks;
  for (int i = 0; i < p.num_layers(); ++i) {
    if (p.layers[i].kind == kBlockKind) blocks.push_back(i);
  }
  if (blocks.empty()) {
    for (int i = 0; i < p.num_layers(); ++i) blocks.push_back(i);
  }
  return blocks;
}

std::vector<std::vector<int>> BlockLayersPerPass(const Profile& p) {
  const std::vector<int> blocks = BlockLayers(p);
  // "p<k>.": the pass prefix of a layer name, or "" without one.
  auto pass_of = [&](int i) -> std::string {
    const std::string& name = p.layers[i].name;
    const size_t dot = name.find('.');
    if (name.size() < 3 || name[0] != 'p' || dot == std::string::npos || dot < 2) return "";
    for (size_t k = 1; k < dot; ++k) {
      if (name[k] < '0' || name[k] > '9') return "";
    }
    return name.substr(0, dot + 1);
  };
  std::vector<std::vector<int>> passes;
  std::string current;
  for (int b : blocks) {
    const std::string pass = pass_of(b);
    if (pass.empty()) return {blocks};
    if (passes.empty() || pass != current) passes.emplace_back();
    current = pass;
    passes.back().push_back(b);
  }
  for (const std::vector<int>& pass : passes) {
    if (pass.size() != passes.front().size()) return {blocks};
  }
  return passes;
}

double GradientAccumulateMs(const Profile& p) {
  if (p.accumulate_ms >= 0) return p.accumulate_ms;
  const StaticMemory& s = p.static_memory;
  const double gradients = static_cast<double>(p.total_gradient_bytes());
  const double optimizer_bytes = 2.0 * static_cast<double>(s.parameter_bytes) + gradients +
                                 2.0 * static_cast<double>(s.optimizer_bytes);
  if (optimizer_bytes <= 0) return 0;
  return p.optimizer_ms * 3.0 * gradients / optimizer_bytes;
}

double OptimizerStepMs(const Profile& p) {
  return p.optimizer_ms + (p.offload_copy_bytes > 0 ? p.host_link.CopyMs(p.offload_copy_bytes) : 0);
}

double BaselineStepMs(const Profile& p) {
  double ms = OptimizerStepMs(p);
  for (const LayerProfile& l : p.layers) ms += l.forward_ms + l.backward_ms;
  return ms;
}

}  // namespace remat
