#include "remat/profile/provenance.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "io/json_fields.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::JsonObjectReader;

std::string DescribeProvenance(const Provenance& p) {
  if (!p.present()) return "";
  std::string s = "LibTorch " + p.torch_version;
  if (!p.device_name.empty()) s += "; " + p.device_name;
  if (!p.compute_capability.empty()) s += ", compute capability " + p.compute_capability;
  if (!p.cpu_capability.empty()) s += ", CPU kernels " + p.cpu_capability;
  if (p.intra_op_threads > 0) {
    s += "; " + std::to_string(p.intra_op_threads) + " intra-op thread" +
         (p.intra_op_threads == 1 ? "" : "s");
  }
  if (!p.allocator.empty()) s += "; allocator " + p.allocator;
  if (!p.allocator_config.empty()) s += " (" + p.allocator_config + ")";
  return s;
}

nlohmann::ordered_json ProvenanceJson(const Provenance& p) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  auto put = [&j](const char* key, const std::string& value) {
    if (!value.empty()) j[key] = value;
  };
  put("torch_version", p.torch_version);
  put("device_name", p.device_name);
  put("cpu_capability", p.cpu_capability);
  put("compute_capability", p.compute_capability);
  if (p.intra_op_threads > 0) j["intra_op_threads"] = p.intra_op_threads;
  put("allocator", p.allocator);
  put("allocator_config", p.allocator_config);
  return j;
}

Status ParseProvenance(const nlohmann::json& j, const std::string& where, Provenance* out) {
  if (!j.is_object()) {
    return Status::Invalid(where + ": expected an object, got " + DescribeJsonValue(j));
  }
  JsonObjectReader r(j, where);
  Provenance p;
  REMAT_RETURN_IF_ERROR(r.String("torch_version", &p.torch_version, false));
  REMAT_RETURN_IF_ERROR(r.String("device_name", &p.device_name, false));
  REMAT_RETURN_IF_ERROR(r.String("cpu_capability", &p.cpu_capability, false));
  REMAT_RETURN_IF_ERROR(r.String("compute_capability", &p.compute_capability, false));
  REMAT_RETURN_IF_ERROR(r.Int("intra_op_threads", &p.intra_op_threads, false, 0, 1 << 20));
  REMAT_RETURN_IF_ERROR(r.String("allocator", &p.allocator, false));
  REMAT_RETURN_IF_ERROR(r.String("allocator_config", &p.allocator_config, false));
  REMAT_RETURN_IF_ERROR(r.NoUnknownKeys({"torch_version", "device_name", "cpu_capability",
                                          "compute_capability", "intra_op_threads", "allocator",
                                          "allocator_config"}));
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace remat
