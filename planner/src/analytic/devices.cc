// Device presets for the roofline time model (dense peaks from vendor data sheets).
#include "json_fields.h"
#include "remat/analytic.h"

namespace remat {
namespace {

const std::vector<DeviceSpec>& Devices() {
  static const std::vector<DeviceSpec> devices = {
      // name      16-bit TF  fp32 TF  GB/s    memory bytes                 efficiency
      {"h200", 989.0, 67.0, 4800.0, int64_t{141} * 1000 * 1000 * 1000, 0.5},
      {"a100", 312.0, 19.5, 2039.0, int64_t{80} * 1000 * 1000 * 1000, 0.5},
      {"rtx4090", 165.2, 82.6, 1008.0, int64_t{24} << 30, 0.5},
      // A 2-core AVX2 machine with OpenBLAS (this project's CI machine kind).
      {"cpu", 0.05, 0.1, 20.0, int64_t{24} << 30, 0.5},
  };
  return devices;
}

}  // namespace

std::vector<std::string> DeviceNames() {
  std::vector<std::string> names;
  for (const DeviceSpec& d : Devices()) names.push_back(d.name);
  return names;
}

Result<DeviceSpec> LookupDevice(std::string_view name) {
  for (const DeviceSpec& d : Devices()) {
    if (d.name == name) return d;
  }
  return Status::Invalid("unknown device '" + std::string(name) + "', expected " +
                         JoinAlternatives(DeviceNames()) + " (or give an achieved TFLOP/s)");
}

}  // namespace remat
