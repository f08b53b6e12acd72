// The multi-GPU flags: --gpus, --ddp, --zero, --fsdp, --shard-group,
// --bucket-cap-mb, --tp, --sp, --pp, --pp-schedule, --virtual-stages, read
// into the library's Parallelism (remat/model/parallel.h).
#ifndef REMAT_CLI_PARALLEL_FLAGS_H_
#define REMAT_CLI_PARALLEL_FLAGS_H_

#include <optional>
#include <vector>

#include "args.h"
#include "remat/model/parallel.h"
#include "remat/io/status.h"

namespace remat::cli {

std::vector<FlagSpec> ParallelFlags();

// The parallel settings the flags give; nullopt when none is given. With
// --gpus N > 1 and no data-parallel flag, DDP. Flags that exclude each
// other (--ddp, --zero, --fsdp; --bucket-cap-mb without DDP) fail with one
// line naming them; the checks against the model are ValidateParallelism's.
Result<std::optional<Parallelism>> ParseParallelFlags(const Args& args);

}  // namespace remat::cli

#endif  // REMAT_CLI_PARALLEL_FLAGS_H_
