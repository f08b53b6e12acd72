// Where an output path really points: the file to replace atomically, a
// node to write in place, or an open descriptor. Internal to io.cc.
#ifndef REMAT_SRC_IO_OUTPUT_TARGET_H_
#define REMAT_SRC_IO_OUTPUT_TARGET_H_

#include <sys/types.h>

#include <string>

#include "remat/io/status.h"

namespace remat::internal {

struct OutputTarget {
  enum class Kind {
    kReplace,     // a regular file or a new path: temp file + rename in its folder
    kInPlace,     // a FIFO, a character device, a file in /proc: open and write
    kDescriptor,  // "-", /dev/stdout, /dev/fd/N: write to descriptor `fd`
  };
  Kind kind = Kind::kReplace;
  // kReplace, kInPlace: the path to write; the end of the chain of links the
  // user's path starts (the user's path itself when it is no link).
  std::string path;
  bool exists = false;  // kReplace: a regular file is there now
  mode_t mode = 0;      // kReplace and exists: its permission bits, kept
  int fd = -1;          // kDescriptor
};

// Follows `path` through symbolic links (at most 40; a relative link is
// resolved against the folder of the link) to what an output written there
// should do. Fails with kOutputFailed naming `path` for a directory, a block
// device, a socket, a loop of links, a descriptor that is not open for
// writing, or a path that cannot be looked at (a component that is not a
// folder, no permission); an empty path or one holding a NUL byte fails too.
Result<OutputTarget> ResolveOutputTarget(const std::string& path);

// The folder holding `path`: "." for a bare name, "/" for "/name".
std::string FolderOf(const std::string& path);

// "<path>" or, when links were followed, "<path> -> <target>": how error
// messages name an output.
std::string OutputName(const std::string& path, const OutputTarget& target);

}  // namespace remat::internal

#endif  // REMAT_SRC_IO_OUTPUT_TARGET_H_
