#include "host_link_flags.h"

#include "remat/analytic/analytic.h"
#include "remat/io/units.h"

namespace remat::cli {

std::vector<FlagSpec> HostLinkFlags() {
  return {
      {"host-link", "L",
       "activation offload link: pcie4, pcie5, nvlink-c2c, cpu, none or <N>GB/s (default: "
       "--device preset's (docs/devices.md); none without --device)"},
      {"host-budget", "SIZE",
       "host memory a GPU's rank may fill, e.g. 64GB: its offloaded model state "
       "(--offload-optimizer, --fsdp-cpu-offload) and activations (default: no limit)"},
  };
}

Status ApplyHostLinkFlags(const Args& args, Profile* profile, bool state_offload) {
  if (args.Has("host-link")) {
    Result<HostLink> link = LookupHostLink(args.Get("host-link"));
    if (!link.ok()) return link.status().WithPrefix("option --host-link");
    profile->host_link = *link;
  } else if (args.Has("device") && !profile->host_link.present()) {
    Result<DeviceSpec> device = LookupDevice(args.Get("device"));
    if (device.ok() && !device->host_link.empty()) {
      REMAT_ASSIGN_OR_RETURN(profile->host_link, LookupHostLink(device->host_link));
    }
  }
  if (args.Has("host-budget")) {
    Result<int64_t> bytes = ParseBytes(args.Get("host-budget"));
    if (!bytes.ok()) return bytes.status().WithPrefix("option --host-budget");
    if (*bytes <= 0) {
      return Status::Invalid("option --host-budget: expected a size above 0, got '" +
                             args.Get("host-budget") + "'");
    }
    if (!profile->host_link.present() && !state_offload) {
      return Status::Invalid("option --host-budget " + args.Get("host-budget") +
                             ": nothing is offloaded to the host: give --host-link (activation "
                             "offload), --offload-optimizer cpu or --fsdp-cpu-offload");
    }
    profile->host_link.budget_bytes = *bytes;
  }
  return Status::Ok();
}

}  // namespace remat::cli
