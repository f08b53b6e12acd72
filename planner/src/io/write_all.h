// Checked write(2) of a whole buffer. Internal to the planner library.
#ifndef REMAT_SRC_IO_WRITE_ALL_H_
#define REMAT_SRC_IO_WRITE_ALL_H_

#include <cstddef>

namespace remat::internal {

// Writes `size` bytes at `data` to `fd`, retrying after EINTR and short
// writes. Returns 0, or the errno of the write that failed (EIO for a write
// that wrote nothing without an error). Never closes `fd`.
int WriteAll(int fd, const char* data, size_t size);

// close(2), checked: 0 or its errno. EINTR counts as closed (Linux releases
// the descriptor before it reports EINTR; a retry could close another one).
int CheckedClose(int fd);

}  // namespace remat::internal

#endif  // REMAT_SRC_IO_WRITE_ALL_H_
