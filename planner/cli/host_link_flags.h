// --host-link and --host-budget: the link activation offload copies over
// and the host memory a rank may fill (its offloaded model state and
// activations), applied to a job's profile.
#ifndef REMAT_CLI_HOST_LINK_FLAGS_H_
#define REMAT_CLI_HOST_LINK_FLAGS_H_

#include <vector>

#include "args.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat::cli {

std::vector<FlagSpec> HostLinkFlags();

// Sets profile->host_link from --host-link (a preset or "<N>GB/s"), else
// from --device's preset link when the profile has none, and its budget from
// --host-budget, which needs a link unless the job keeps its model state on
// the host (`state_offload`). Fails with the flag and the value for a bad
// one.
Status ApplyHostLinkFlags(const Args& args, Profile* profile, bool state_offload);

}  // namespace remat::cli

#endif  // REMAT_CLI_HOST_LINK_FLAGS_H_
