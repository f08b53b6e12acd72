// Standard output, checked: `planner` prints through an FdStreamBuf over
// descriptor 1 and, after the command ran, makes sure all of it was written.
#ifndef REMAT_CLI_STANDARD_OUTPUT_H_
#define REMAT_CLI_STANDARD_OUTPUT_H_

#include <ostream>

#include "cli.h"
#include "remat/io/fd_stream.h"

namespace remat::cli {

// Flushes `out` (a stream over `buffer`) and returns `code`, the command's
// exit code, when everything reached the descriptor. If any write failed
// (stdout on a full disk, a closed pipe), prints the one line
// "planner: error: writing standard output: <strerror>" on env.err and
// returns kExitOutputFailed (5), whatever `code` was: what the command
// printed is lost.
int FinishStandardOutput(std::ostream& out, const FdStreamBuf& buffer, int code, Environment& env);

}  // namespace remat::cli

#endif  // REMAT_CLI_STANDARD_OUTPUT_H_
