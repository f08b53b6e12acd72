// Reading inputs and writing outputs safely.
#ifndef REMAT_IO_H_
#define REMAT_IO_H_

#include <string>

#include "remat/status.h"

namespace remat {

// Reads a whole regular file. Errors name the path and say what is wrong:
// missing, a directory, unreadable, larger than 256 MiB, a NUL byte in the
// path (the file system would see a different, shorter name).
Result<std::string> ReadTextFile(const std::string& path);

// Writes `content` to a temporary file beside `path` ("<path>.tmp.<pid>.<n>"),
// syncs it and renames it into place, so a crash or Ctrl-C never leaves half
// a file and the previous file survives any failure. A failed write removes
// the temporary file; so does SIGINT, SIGTERM, SIGHUP or SIGQUIT arriving
// during the write when the signal is at its default action (the handler
// removes the file and re-raises the signal). A replaced file keeps its
// permissions. Thread-safe (writes are serialized). "-" writes to standard
// output.
Status WriteFileAtomic(const std::string& path, const std::string& content);

}  // namespace remat

#endif  // REMAT_IO_H_
