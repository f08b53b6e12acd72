#include "remat/io/fd_stream.h"

#include <algorithm>
#include <cstring>

#include "io/write_all.h"

namespace remat {

FdStreamBuf::FdStreamBuf(int fd, bool flush_each_line, size_t buffer_bytes)
    : fd_(fd), flush_each_line_(flush_each_line), buffer_(buffer_bytes > 0 ? buffer_bytes : 1) {
  setp(buffer_.data(), buffer_.data() + buffer_.size());
}

FdStreamBuf::~FdStreamBuf() { Drain(); }

bool FdStreamBuf::Drain() {
  const size_t n = static_cast<size_t>(pptr() - pbase());
  setp(buffer_.data(), buffer_.data() + buffer_.size());
  if (error_ != 0) return false;
  error_ = internal::WriteAll(fd_, buffer_.data(), n);
  return error_ == 0;
}

FdStreamBuf::int_type FdStreamBuf::overflow(int_type ch) {
  if (!Drain()) return traits_type::eof();
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  *pptr() = traits_type::to_char_type(ch);
  pbump(1);
  if (flush_each_line_ && ch == '\n' && !Drain()) return traits_type::eof();
  return ch;
}

std::streamsize FdStreamBuf::xsputn(const char* s, std::streamsize n) {
  if (error_ != 0) return 0;
  std::streamsize done = 0;
  while (done < n) {
    if (pptr() == epptr() && !Drain()) return done;
    const std::streamsize room = epptr() - pptr();
    const std::streamsize take = std::min(room, n - done);
    std::memcpy(pptr(), s + done, static_cast<size_t>(take));
    pbump(static_cast<int>(take));
    done += take;
  }
  if (flush_each_line_ && std::memchr(s, '\n', static_cast<size_t>(n)) != nullptr && !Drain()) {
    return 0;
  }
  return done;
}

int FdStreamBuf::sync() { return Drain() ? 0 : -1; }

}  // namespace remat
