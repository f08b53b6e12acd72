#include "io/write_all.h"

#include <unistd.h>

#include <cerrno>

namespace remat::internal {

int WriteAll(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

int CheckedClose(int fd) {
  if (::close(fd) == 0 || errno == EINTR) return 0;
  return errno;
}

}  // namespace remat::internal
