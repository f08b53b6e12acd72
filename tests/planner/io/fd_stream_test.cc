// FdStreamBuf: what goes through it reaches the descriptor, and a write that
// fails is recorded instead of lost.
#include "remat/io/fd_stream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <ostream>
#include <string>

#include "remat/io/io.h"
#include "testing/scratch_dir.h"

namespace remat {
namespace {

using testing::ScratchDir;

std::string ReadAll(const std::string& path) { return ReadTextFile(path).value(); }

TEST(FdStreamBuf, WritesEverythingThroughASmallBuffer) {
  ScratchDir dir;
  const std::string path = dir.Path("out.txt");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::string expected;
  {
    FdStreamBuf buffer(fd, /*flush_each_line=*/false, /*buffer_bytes=*/16);
    std::ostream out(&buffer);
    for (int i = 0; i < 1000; ++i) {
      out << i << ' ';
      expected += std::to_string(i) + ' ';
    }
    out << std::string(100, 'x');  // longer than the buffer in one piece
    expected += std::string(100, 'x');
    out.flush();
    EXPECT_TRUE(out.good());
    EXPECT_EQ(buffer.error(), 0);
  }
  ::close(fd);
  EXPECT_EQ(ReadAll(path), expected);
}

TEST(FdStreamBuf, BuffersUntilFlushOrALineWhenAsked) {
  ScratchDir dir;
  const std::string path = dir.Path("out.txt");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  FdStreamBuf buffered(fd);
  std::ostream a(&buffered);
  a << "held\n";
  EXPECT_EQ(ReadAll(path), "");
  a.flush();
  EXPECT_EQ(ReadAll(path), "held\n");
  FdStreamBuf lines(fd, /*flush_each_line=*/true);
  std::ostream b(&lines);
  b << "line\n";
  EXPECT_EQ(ReadAll(path), "held\nline\n");
  b << "half";
  EXPECT_EQ(ReadAll(path), "held\nline\n");
  b.flush();
  ::close(fd);
  EXPECT_EQ(ReadAll(path), "held\nline\nhalf");
}

// Standard output on a full disk: the error is kept, the stream goes bad.
TEST(FdStreamBuf, RecordsTheFirstFailedWrite) {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no /dev/full here";
  FdStreamBuf buffer(fd);
  std::ostream out(&buffer);
  out << "a plan";
  EXPECT_EQ(buffer.error(), 0);  // still in the buffer
  out.flush();
  EXPECT_EQ(buffer.error(), ENOSPC);
  EXPECT_TRUE(out.bad());
  ::close(fd);
}

TEST(FdStreamBuf, AClosedDescriptorIsAnError) {
  FdStreamBuf buffer(-1, /*flush_each_line=*/false, /*buffer_bytes=*/4);
  std::ostream out(&buffer);
  out << "more than four bytes";
  EXPECT_EQ(buffer.error(), EBADF);
  EXPECT_TRUE(out.bad());
}

}  // namespace
}  // namespace remat
