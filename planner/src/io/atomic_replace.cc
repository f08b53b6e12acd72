#include "io/atomic_replace.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <mutex>

#include "io/write_all.h"
#include "io/io_internal.h"

namespace remat::internal {
namespace {

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

// Writes, syncs and closes `fd`: 0 or the errno of the first step that failed.
// `step` says which.
int WriteSyncClose(int fd, const std::string& content, const char** step) {
  int err = WriteAll(fd, content.data(), content.size());
  *step = "write failed";
  if (err == 0 && ::fsync(fd) != 0) {
    err = errno;
    *step = "sync failed";
  }
  const int close_err = CheckedClose(fd);
  if (err == 0 && close_err != 0) {
    err = close_err;
    *step = "close failed";
  }
  return err;
}

}  // namespace

void SetBeforeRenameHookForTesting(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(write_mutex);
  before_rename_hook = std::move(hook);
}

Status ReplaceAtomically(const OutputTarget& target, const std::string& name,
                         const std::string& content) {
  std::lock_guard<std::mutex> lock(write_mutex);
  static unsigned counter = 0;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = target.path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Status::OutputFailed(name + ": cannot write: " + std::strerror(errno));
  TempFileGuard guard(tmp);
  // A replaced file keeps its permissions (best effort: the content matters more).
  if (target.exists) (void)::fchmod(fd, target.mode);
  const char* step = "";
  const int err = WriteSyncClose(fd, content, &step);
  if (err != 0) {
    ::unlink(tmp.c_str());
    return Status::OutputFailed(name + ": " + step + ": " + std::strerror(err));
  }
  if (before_rename_hook) before_rename_hook(tmp);
  if (::rename(tmp.c_str(), target.path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::OutputFailed(name + ": cannot move the written file into place: " + why);
  }
  // Make the rename itself durable (best effort: not every file system allows it).
  const int dir = ::open(FolderOf(target.path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return Status::Ok();
}

}  // namespace remat::internal
