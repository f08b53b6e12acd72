// Reading inputs and writing outputs where the user pointed: a regular file
// replaced atomically (a failed or interrupted write keeps the previous file
// and leaves no temporary file behind), a link's target likewise with the
// link kept, a FIFO or device written in place; every failure reported.
#include "remat/io/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "io/io_internal.h"
#include "testing/scratch_dir.h"

namespace remat {
namespace {

using testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Put(const std::string& path, const std::string& content) { std::ofstream(path) << content; }

// What a writer sends through a FIFO opened (non-blocking) as `fd`, until it
// closes its end; gives up after 10 s without news, so a writer that never
// comes fails the test instead of hanging it.
std::string DrainFifo(int fd) {
  std::string got;
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 10000) > 0) {
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      break;
    }
  }
  return got;
}

// Runs `body` in a child process and returns its wait status.
template <typename F>
int InChild(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(WriteOutputFile, WritesAndReplaces) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  ASSERT_TRUE(WriteOutputFile(out, "first").ok());
  EXPECT_EQ(ReadAll(out), "first");
  ASSERT_TRUE(WriteOutputFile(out, "second").ok());
  EXPECT_EQ(ReadAll(out), "second");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

TEST(WriteOutputFile, KeepsThePermissionsOfAReplacedFile) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "old");
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
  ASSERT_TRUE(WriteOutputFile(out, "new").ok());
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST(WriteOutputFile, RefusesADirectoryAndAMissingDirectory) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.Path("sub").c_str(), 0755), 0);
  const Status s = WriteOutputFile(dir.Path("sub"), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sub: is a directory"), std::string::npos) << s.message();
  EXPECT_EQ(s.code(), StatusCode::kOutputFailed);
  const Status m = WriteOutputFile(dir.Path("nope/plan.json"), "x");
  EXPECT_EQ(m.code(), StatusCode::kOutputFailed);
  EXPECT_NE(m.message().find("nope/plan.json: cannot write: No such file or directory"),
            std::string::npos)
      << m.message();
  EXPECT_EQ(dir.Names(), std::set<std::string>{"sub"});
}

// A write that fails half-way (here: the file size limit, which holds even
// for root) keeps the previous file and removes the temporary one.
TEST(WriteOutputFile, FailedWriteKeepsThePreviousFileAndLeavesNoTemporary) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  const int status = InChild([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const Status s = WriteOutputFile(out, std::string(1 << 20, 'x'));
    ::_exit(s.code() == StatusCode::kOutputFailed &&
                    s.message().find("plan.json: write failed: File too large") != std::string::npos
                ? 0
                : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(out), "previous plan");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

TEST(WriteOutputFile, UnwritableDirectoryFailsCleanly) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions are not enforced";
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  const Status s = WriteOutputFile(out, "new");
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("plan.json: cannot write"), std::string::npos) << s.message();
  EXPECT_EQ(ReadAll(out), "previous plan");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

// Ctrl-C (or kill, or a closed terminal) while the temporary file exists:
// the process dies of the signal as it would have, the temporary file is
// gone and the previous file is intact.
class Interrupted : public ::testing::TestWithParam<int> {};

TEST_P(Interrupted, RemovesTheTemporaryAndKeepsThePreviousFile) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  const int sig = GetParam();
  const int status = InChild([&] {
    ::signal(sig, SIG_DFL);
    internal::SetBeforeRenameHookForTesting([sig](const std::string& temp) {
      if (::access(temp.c_str(), F_OK) != 0) ::_exit(3);  // the hook must see the file
      ::raise(sig);
    });
    (void)WriteOutputFile(out, "new plan");
    ::_exit(4);  // not reached: the signal ends the process
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), sig);
  EXPECT_EQ(ReadAll(out), "previous plan");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

INSTANTIATE_TEST_SUITE_P(Signals, Interrupted, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGINT    ? "SIGINT"
                                              : info.param == SIGTERM ? "SIGTERM"
                                                                      : "SIGHUP");
                         });

// A program that handles SIGINT itself keeps its handler: the write is not
// cut short and completes.
TEST(WriteOutputFile, LeavesAnInstalledHandlerAlone) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  const int status = InChild([&] {
    static volatile sig_atomic_t seen = 0;
    ::signal(SIGINT, [](int) { seen = 1; });
    internal::SetBeforeRenameHookForTesting([](const std::string&) { ::raise(SIGINT); });
    const Status s = WriteOutputFile(out, "new plan");
    ::_exit(s.ok() && seen ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(out), "new plan");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

bool IsLink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::string LinkTarget(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

// -o link.json: the file the link points to gets the content (atomically, in
// its own folder), the link stays a link.
TEST(WriteOutputFile, ThroughAnAbsoluteLinkReplacesTheTargetAndKeepsTheLink) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.Path("plans").c_str(), 0755), 0);
  const std::string target = dir.Path("plans/plan.json");
  Put(target, "old plan");
  ASSERT_EQ(::chmod(target.c_str(), 0640), 0);
  const std::string link = dir.Path("link.json");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteOutputFile(link, "new plan").ok());
  EXPECT_TRUE(IsLink(link));
  EXPECT_EQ(LinkTarget(link), target);
  EXPECT_EQ(ReadAll(target), "new plan");
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(dir.Names(), (std::set<std::string>{"link.json", "plans"}));
  EXPECT_EQ(dir.Names("plans"), std::set<std::string>{"plan.json"});
}

// A relative link is resolved against the link's folder, not the working
// directory; a chain of links is followed to its end.
TEST(WriteOutputFile, FollowsRelativeLinksFromTheirFolder) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.Path("links").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.Path("plans").c_str(), 0755), 0);
  Put(dir.Path("plans/plan.json"), "old");
  // links/out.json -> hop.json -> ../plans/plan.json
  ASSERT_EQ(::symlink("hop.json", dir.Path("links/out.json").c_str()), 0);
  ASSERT_EQ(::symlink("../plans/plan.json", dir.Path("links/hop.json").c_str()), 0);
  ASSERT_TRUE(WriteOutputFile(dir.Path("links/out.json"), "new").ok());
  EXPECT_EQ(ReadAll(dir.Path("plans/plan.json")), "new");
  EXPECT_EQ(LinkTarget(dir.Path("links/out.json")), "hop.json");
  EXPECT_EQ(LinkTarget(dir.Path("links/hop.json")), "../plans/plan.json");
  EXPECT_EQ(dir.Names("links"), (std::set<std::string>{"hop.json", "out.json"}));
  EXPECT_EQ(dir.Names("plans"), std::set<std::string>{"plan.json"});
}

// A dangling link: the file it names is created, as `> link` would.
TEST(WriteOutputFile, ADanglingLinkCreatesItsTarget) {
  ScratchDir dir;
  ASSERT_EQ(::symlink("new.json", dir.Path("link.json").c_str()), 0);
  ASSERT_TRUE(WriteOutputFile(dir.Path("link.json"), "plan").ok());
  EXPECT_TRUE(IsLink(dir.Path("link.json")));
  EXPECT_EQ(ReadAll(dir.Path("new.json")), "plan");
  EXPECT_EQ(dir.Names(), (std::set<std::string>{"link.json", "new.json"}));
}

TEST(WriteOutputFile, RefusesALoopOfLinks) {
  ScratchDir dir;
  ASSERT_EQ(::symlink("b", dir.Path("a").c_str()), 0);
  ASSERT_EQ(::symlink("a", dir.Path("b").c_str()), 0);
  const Status s = WriteOutputFile(dir.Path("a"), "x");
  EXPECT_EQ(s.code(), StatusCode::kOutputFailed);
  EXPECT_NE(s.message().find("Too many levels of symbolic links"), std::string::npos)
      << s.message();
  EXPECT_EQ(dir.Names(), (std::set<std::string>{"a", "b"}));
}

// -o plan.fifo: written in place for the process reading it; the FIFO stays.
TEST(WriteOutputFile, WritesIntoAFifoAndKeepsIt) {
  ScratchDir dir;
  const std::string fifo = dir.Path("plan.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string content(200000, 'p');  // more than a pipe holds
  const int reading = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reading, 0);
  std::string received;
  std::thread reader([&] { received = DrainFifo(reading); });
  const Status s = WriteOutputFile(fifo, content);
  reader.join();
  ::close(reading);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(received, content);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.fifo"});
}

// A link to /dev/full: the write fails with the system's reason, the link
// and the device stay what they were (nothing is renamed in /dev).
TEST(WriteOutputFile, ALinkToDevFullFailsAndLeavesBothAlone) {
  struct stat before;
  if (::stat("/dev/full", &before) != 0) GTEST_SKIP() << "no /dev/full here";
  ScratchDir dir;
  const std::string link = dir.Path("plan.json");
  ASSERT_EQ(::symlink("/dev/full", link.c_str()), 0);
  const Status s = WriteOutputFile(link, "plan");
  EXPECT_EQ(s.code(), StatusCode::kOutputFailed);
  EXPECT_EQ(s.message(), link + " -> /dev/full: write failed: No space left on device");
  EXPECT_EQ(LinkTarget(link), "/dev/full");
  struct stat after;
  ASSERT_EQ(::stat("/dev/full", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_rdev, before.st_rdev);
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

// "-", /dev/stdout and /dev/fd/1 write to the descriptor itself: with
// standard output on a file, that file is written through its descriptor
// (at its offset), not replaced.
TEST(WriteOutputFile, StandardOutputNamesWriteToTheDescriptor) {
  ScratchDir dir;
  const std::string out = dir.Path("stdout.txt");
  const int status = InChild([&] {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(2);
    struct stat st;
    ::fstat(STDOUT_FILENO, &st);
    const bool ok = WriteOutputFile("-", "a").ok() && WriteOutputFile("/dev/stdout", "b").ok() &&
                    WriteOutputFile("/dev/fd/1", "c").ok();
    struct stat now;
    ::stat(out.c_str(), &now);
    ::_exit(ok && now.st_ino == st.st_ino ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(out), "abc");
  const Status closed = WriteOutputFile("/dev/fd/987", "x");
  EXPECT_EQ(closed.code(), StatusCode::kOutputFailed);
  EXPECT_NE(closed.message().find("descriptor 987 is not open"), std::string::npos)
      << closed.message();
}

// A std::string path can hold a NUL the file system would cut at.
TEST(ReadTextFile, RejectsAPathWithANulByte) {
  ScratchDir dir;
  Put(dir.Path("a.json"), "{}");
  const std::string path = dir.Path("a.json") + std::string(1, '\0') + "b";
  EXPECT_NE(ReadTextFile(path).status().message().find("the path contains a NUL byte"),
            std::string::npos);
  EXPECT_FALSE(WriteOutputFile(path, "x").ok());
  EXPECT_EQ(ReadAll(dir.Path("a.json")), "{}");
}

TEST(ReadTextFile, NamesThePathAndWhatIsWrong) {
  ScratchDir dir;
  EXPECT_NE(ReadTextFile(dir.Path("nope.json")).status().message().find("nope.json: no such file"),
            std::string::npos);
  EXPECT_NE(ReadTextFile(dir.path()).status().message().find("is a directory"), std::string::npos);
  EXPECT_NE(ReadTextFile("/dev/null").status().message().find("not a regular file"),
            std::string::npos);
  Put(dir.Path("ok.json"), "{}");
  EXPECT_EQ(*ReadTextFile(dir.Path("ok.json")), "{}");
}

}  // namespace
}  // namespace remat
