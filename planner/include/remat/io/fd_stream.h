// An output stream buffer over a file descriptor whose every write is
// checked: what `planner` prints to standard output goes through one, so a
// full disk or a closed pipe is an error, not a lost plan.
#ifndef REMAT_FD_STREAM_H_
#define REMAT_FD_STREAM_H_

#include <cstddef>
#include <streambuf>
#include <vector>

namespace remat {

// Buffers what an std::ostream writes and hands it to write(2) on `fd`
// (retrying after EINTR and short writes) when the buffer fills, on flush,
// at a newline when `flush_each_line`, and when destroyed. The first failed
// write's errno is kept (error()); from then on nothing more is written and
// the stream sees every write fail (badbit). Does not own `fd`: never closes
// it. Not thread-safe, like the std::ostream over it.
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd, bool flush_each_line = false, size_t buffer_bytes = 64 << 10);
  ~FdStreamBuf() override;
  FdStreamBuf(const FdStreamBuf&) = delete;
  FdStreamBuf& operator=(const FdStreamBuf&) = delete;

  // The errno of the first write that failed (ENOSPC, EPIPE, EBADF...); 0
  // while every write succeeded. Flush the stream first to check all of it.
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  // Writes out the buffer; false (error_ set) if it could not.
  bool Drain();

  int fd_;
  bool flush_each_line_;
  std::vector<char> buffer_;
  int error_ = 0;
};

}  // namespace remat

#endif  // REMAT_FD_STREAM_H_
