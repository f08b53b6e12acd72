#include "remat/io/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/atomic_replace.h"
#include "io/output_target.h"
#include "io/write_all.h"

namespace remat {
namespace {

using internal::OutputTarget;

constexpr int64_t kMaxInputBytes = int64_t{256} << 20;

Status Failed(const std::string& name, const char* step, int err) {
  return Status::OutputFailed(name + ": " + step + ": " + std::strerror(err));
}

// A FIFO, a character device or a file in /proc: opened and written as it
// is, never truncated or renamed over.
Status WriteInPlace(const OutputTarget& target, const std::string& name,
                    const std::string& content) {
  int fd;
  do {
    fd = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);  // a FIFO's open waits for its reader
  if (fd < 0) return Failed(name, "cannot write", errno);
  const int err = internal::WriteAll(fd, content.data(), content.size());
  const int close_err = internal::CheckedClose(fd);
  if (err != 0) return Failed(name, "write failed", err);
  if (close_err != 0) return Failed(name, "close failed", close_err);
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadTextFile(const std::string& path) {
  struct stat st;
  if (path.empty()) return Status::Invalid("no input file given");
  if (path.find('\0') != std::string::npos) {
    return Status::Invalid(path.substr(0, path.find('\0')) + "...: the path contains a NUL byte");
  }
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Invalid(path + ": no such file");
    return Status::Invalid(path + ": cannot read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Status::Invalid(path + ": is a directory, expected a JSON file");
  if (!S_ISREG(st.st_mode)) return Status::Invalid(path + ": not a regular file");
  if (st.st_size > kMaxInputBytes) {
    return Status::Invalid(path + ": file is larger than 256 MiB, not a remat input");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Invalid(path + ": cannot read: " + std::strerror(errno));
  // Read at once into a string of the file's size (a stream copy of a
  // 600 KB profile takes a millisecond), then whatever the file grew by.
  std::string text(static_cast<size_t>(st.st_size), '\0');
  in.read(text.data(), st.st_size);
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return Status::Invalid(path + ": read error");
  if (in) {
    std::ostringstream rest;
    rest << in.rdbuf();
    if (in.bad()) return Status::Invalid(path + ": read error");
    text += rest.str();
  }
  return text;
}

Status WriteOutputFile(const std::string& path, const std::string& content) {
  REMAT_ASSIGN_OR_RETURN(const OutputTarget target, internal::ResolveOutputTarget(path));
  const std::string name = path == "-" ? "standard output" : internal::OutputName(path, target);
  switch (target.kind) {
    case OutputTarget::Kind::kReplace:
      return internal::ReplaceAtomically(target, name, content);
    case OutputTarget::Kind::kInPlace:
      return WriteInPlace(target, name, content);
    case OutputTarget::Kind::kDescriptor: {
      const int err = internal::WriteAll(target.fd, content.data(), content.size());
      return err == 0 ? Status::Ok() : Failed(name, "write failed", err);
    }
  }
  return Status::Internal("unknown output kind");
}

}  // namespace remat
