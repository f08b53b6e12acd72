// --host-link and --host-budget: the link activation offload copies over
// and the host memory it may fill, applied to a job's profile.
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
// --host-budget. Fails with the flag and the value for a bad one.
Status ApplyHostLinkFlags(const Args& args, Profile* profile);

}  // namespace remat::cli

#endif  // REMAT_CLI_HOST_LINK_FLAGS_H_
