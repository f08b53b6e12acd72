// Replacing a regular file atomically: a temporary file beside it, synced,
// renamed into place. Internal to io.cc.
#ifndef REMAT_SRC_IO_ATOMIC_REPLACE_H_
#define REMAT_SRC_IO_ATOMIC_REPLACE_H_

#include <string>

#include "io/output_target.h"
#include "remat/io/status.h"

namespace remat::internal {

// Writes `content` to `target.path` (kind kReplace) as WriteOutputFile
// (remat/io/io.h) describes: temp file "<target.path>.tmp.<pid>.<n>", fsync,
// rename, fsync of the folder (best effort); the old file's permissions
// kept; the temp file removed on any failure and on a fatal signal at its
// default action. Errors are kOutputFailed and start with `name`.
Status ReplaceAtomically(const OutputTarget& target, const std::string& name,
                         const std::string& content);

}  // namespace remat::internal

#endif  // REMAT_SRC_IO_ATOMIC_REPLACE_H_
