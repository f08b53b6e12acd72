// Reading inputs and writing outputs safely.
#ifndef REMAT_IO_H_
#define REMAT_IO_H_

#include <string>

#include "remat/status.h"

namespace remat {

// Reads a whole regular file. Errors name the path and say what is wrong:
// missing, a directory, unreadable, larger than 256 MiB.
Result<std::string> ReadTextFile(const std::string& path);

// Writes `content` to a temporary file beside `path` and renames it into
// place, so a crash or Ctrl-C never leaves half a file and the previous file
// survives any failure. "-" writes to standard output.
Status WriteFileAtomic(const std::string& path, const std::string& content);

}  // namespace remat

#endif  // REMAT_IO_H_
