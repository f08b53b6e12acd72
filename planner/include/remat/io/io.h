// Reading inputs and writing outputs safely.
#ifndef REMAT_IO_H_
#define REMAT_IO_H_

#include <string>

#include "remat/io/status.h"

namespace remat {

// Reads a whole regular file. Errors name the path and say what is wrong:
// missing, a directory, unreadable, larger than 256 MiB, a NUL byte in the
// path (the file system would see a different, shorter name).
Result<std::string> ReadTextFile(const std::string& path);

// Writes `content` to the output the user named with `path`, where it points:
//
// - A regular file, or a path that does not exist yet: replaced atomically.
//   The content goes to a temporary file beside it ("<file>.tmp.<pid>.<n>"),
//   is synced, and is renamed into place, so a crash or Ctrl-C never leaves
//   half a file and the previous file survives any failure. A replaced file
//   keeps its permissions.
// - A symbolic link (or a chain of them; a relative link is resolved against
//   the folder holding the link): the file it finally points to is replaced
//   atomically, in that file's folder, as above; the links stay links. A
//   dangling link creates the file it points to, as `> link` in a shell
//   does (its folder must exist).
// - A FIFO or a character device (/dev/null, a terminal, /dev/full): written
//   in place, never renamed over. A FIFO's open waits for its reader.
// - "-", "/dev/stdout", "/dev/stderr", "/dev/fd/N", "/proc/self/fd/N": the
//   descriptor itself (written directly, unbuffered; a caller that also
//   prints to a buffered stream on that descriptor flushes it first). Other
//   paths in /proc are written in place.
// - A directory, a block device or a socket: refused.
//
// Every write, fsync and close is checked. Any failure returns
// kOutputFailed with a one-line message naming `path` (and the file a link
// led to) and the system's reason ("plan.json: write failed: No space left
// on device"); an existing regular file is then left exactly as it was and
// no temporary file is left behind. A temporary file is also removed when
// SIGINT, SIGTERM, SIGHUP or SIGQUIT arrives during the write while the
// signal is at its default action (the handler removes the file and
// re-raises the signal). Thread-safe (atomic replacements are serialized).
Status WriteOutputFile(const std::string& path, const std::string& content);

}  // namespace remat

#endif  // REMAT_IO_H_
