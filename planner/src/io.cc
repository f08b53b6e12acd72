#include "remat/io.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "io_internal.h"

namespace remat {
namespace {

constexpr int64_t kMaxInputBytes = int64_t{256} << 20;

// Signals that end the process by default while a temporary file is open:
// Ctrl-C, kill, a closed terminal, Ctrl-\.
constexpr int kFatalSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// The temporary file being written, for the signal handler. One write at a
// time (write_mutex), so one slot is enough.
char temp_path[PATH_MAX];
volatile sig_atomic_t temp_active = 0;
std::mutex write_mutex;
std::function<void(const std::string&)> before_rename_hook;

// Removes the temporary file, then lets the signal do what it would have
// done (unlink, signal and raise are async-signal-safe).
extern "C" void RemoveTempAndReraise(int sig) {
  if (temp_active) ::unlink(temp_path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// While alive: `path` is the temporary file, removed if a fatal signal
// arrives. Handlers are installed only for signals left at their default
// (a program that handles or ignores a signal keeps running and finishes or
// cleans up the write itself).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path) {
    std::snprintf(temp_path, sizeof temp_path, "%s", path.c_str());
    temp_active = 1;
    struct sigaction sa {};
    sa.sa_handler = RemoveTempAndReraise;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kFatalSignals); ++i) {
      struct sigaction old {};
      installed_[i] = ::sigaction(kFatalSignals[i], nullptr, &old) == 0 &&
                      old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO) &&
                      ::sigaction(kFatalSignals[i], &sa, nullptr) == 0;
    }
  }
  ~TempFileGuard() {
    for (size_t i = 0; i < std::size(kFatalSignals); ++i) {
      if (installed_[i]) ::signal(kFatalSignals[i], SIG_DFL);
    }
    temp_active = 0;
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  bool installed_[std::size(kFatalSignals)] = {};
};

bool WriteAll(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

namespace internal {
void SetBeforeRenameHookForTesting(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(write_mutex);
  before_rename_hook = std::move(hook);
}
}  // namespace internal

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
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::Invalid(path + ": read error");
  return buffer.str();
}

Status WriteFileAtomic(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    return std::cout ? Status::Ok() : Status::Invalid("cannot write to standard output");
  }
  if (path.empty()) return Status::Invalid("empty output path");
  if (path.find('\0') != std::string::npos) {
    return Status::Invalid(path.substr(0, path.find('\0')) + "...: the path contains a NUL byte");
  }
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return Status::Invalid(path + ": is a directory, expected a file path for the output");
  }
  std::lock_guard<std::mutex> lock(write_mutex);
  static unsigned counter = 0;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Status::Invalid(path + ": cannot write: " + std::strerror(errno));
  TempFileGuard guard(tmp);
  // A replaced file keeps its permissions.
  if (exists && S_ISREG(st.st_mode)) (void)::fchmod(fd, st.st_mode & 07777);
  const bool written = WriteAll(fd, content);
  const int write_errno = errno;
  const bool synced = written && ::fsync(fd) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !synced || !closed) {
    const std::string why = std::strerror(!written ? write_errno : !synced ? sync_errno : errno);
    ::unlink(tmp.c_str());
    return Status::Invalid(path + ": write failed: " + why);
  }
  if (before_rename_hook) before_rename_hook(tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::Invalid(path + ": cannot move the written file into place: " + why);
  }
  // Make the rename itself durable (best effort: not every file system allows it).
  const int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return Status::Ok();
}

}  // namespace remat
