#include "io/output_target.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace remat::internal {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's MAXSYMLINKS

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The descriptor a path names ("/dev/stdout", "/dev/fd/3", "/proc/self/fd/1"),
// or -1.
int DescriptorNamed(const std::string& p) {
  if (p == "/dev/stdout") return STDOUT_FILENO;
  if (p == "/dev/stderr") return STDERR_FILENO;
  const std::vector<std::string> folders = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/",
                                            "/proc/" + std::to_string(::getpid()) + "/fd/"};
  for (const std::string& folder : folders) {
    if (!StartsWith(p, folder)) continue;
    const std::string n = p.substr(folder.size());
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) {
      return -1;
    }
    return std::stoi(n);
  }
  return -1;
}

Status Fail(const std::string& path, const std::string& at, const std::string& why) {
  return Status::OutputFailed((at == path ? path : path + " -> " + at) + ": " + why);
}

Result<OutputTarget> Descriptor(const std::string& path, int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) {
    return Fail(path, path, "descriptor " + std::to_string(fd) + " is not open");
  }
  if ((flags & O_ACCMODE) == O_RDONLY) {
    return Fail(path, path, "descriptor " + std::to_string(fd) + " is not open for writing");
  }
  OutputTarget t;
  t.kind = OutputTarget::Kind::kDescriptor;
  t.fd = fd;
  return t;
}

// What to do with `at`, a path that is not a link, from its lstat().
Result<OutputTarget> ByType(const std::string& path, const std::string& at, const struct stat& st) {
  OutputTarget t;
  t.path = at;
  if (S_ISREG(st.st_mode)) {
    t.exists = true;
    t.mode = st.st_mode & 07777;
    return t;
  }
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    t.kind = OutputTarget::Kind::kInPlace;
    return t;
  }
  if (S_ISDIR(st.st_mode)) return Fail(path, at, "is a directory, expected a file path");
  if (S_ISBLK(st.st_mode)) return Fail(path, at, "is a block device; not written over");
  return Fail(path, at, "is a socket, not a file");
}

}  // namespace

Result<OutputTarget> ResolveOutputTarget(const std::string& path) {
  if (path.empty()) return Status::OutputFailed("empty output path");
  if (path.find('\0') != std::string::npos) {
    return Status::OutputFailed(path.substr(0, path.find('\0')) +
                                "...: the path contains a NUL byte");
  }
  if (path == "-") return Descriptor("standard output", STDOUT_FILENO);
  std::string at = path;
  for (int hop = 0; hop <= kMaxLinks; ++hop) {
    const int fd = DescriptorNamed(at);
    if (fd >= 0) return Descriptor(path, fd);
    struct stat st;
    if (StartsWith(at, "/proc/")) {
      // The kernel's own links (a descriptor's "pipe:[123]") are no paths:
      // let open() follow them.
      if (::stat(at.c_str(), &st) != 0) return Fail(path, at, std::strerror(errno));
      if (S_ISDIR(st.st_mode)) return ByType(path, at, st);
      OutputTarget t;
      t.kind = OutputTarget::Kind::kInPlace;
      t.path = at;
      return t;
    }
    if (::lstat(at.c_str(), &st) != 0) {
      if (errno != ENOENT)
        return Fail(path, at, "cannot write: " + std::string(std::strerror(errno)));
      OutputTarget t;  // a new file (perhaps the target of a dangling link)
      t.path = at;
      return t;
    }
    if (!S_ISLNK(st.st_mode)) return ByType(path, at, st);
    std::string link(PATH_MAX, '\0');
    const ssize_t n = ::readlink(at.c_str(), link.data(), link.size());
    if (n < 0) return Fail(path, at, "cannot read the link: " + std::string(std::strerror(errno)));
    link.resize(static_cast<size_t>(n));
    at = link[0] == '/' ? link : FolderOf(at) + "/" + link;
  }
  return Fail(path, path, std::strerror(ELOOP));
}

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string OutputName(const std::string& path, const OutputTarget& target) {
  if (target.kind == OutputTarget::Kind::kDescriptor || target.path == path) return path;
  return path + " -> " + target.path;
}

}  // namespace remat::internal
