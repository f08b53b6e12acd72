// Reading inputs and writing outputs atomically: a failed or interrupted
// write keeps the previous file and leaves no temporary file behind.
#include "remat/io.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "io_internal.h"
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

TEST(WriteFileAtomic, WritesAndReplaces) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  ASSERT_TRUE(WriteFileAtomic(out, "first").ok());
  EXPECT_EQ(ReadAll(out), "first");
  ASSERT_TRUE(WriteFileAtomic(out, "second").ok());
  EXPECT_EQ(ReadAll(out), "second");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

TEST(WriteFileAtomic, KeepsThePermissionsOfAReplacedFile) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "old");
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
  ASSERT_TRUE(WriteFileAtomic(out, "new").ok());
  struct stat st;
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST(WriteFileAtomic, RefusesADirectoryAndAMissingDirectory) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.Path("sub").c_str(), 0755), 0);
  const Status s = WriteFileAtomic(dir.Path("sub"), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sub: is a directory"), std::string::npos) << s.message();
  const Status m = WriteFileAtomic(dir.Path("nope/plan.json"), "x");
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.message().find("nope/plan.json: cannot write"), std::string::npos) << m.message();
  EXPECT_EQ(dir.Names(), std::set<std::string>{"sub"});
}

// A write that fails half-way (here: the file size limit, which holds even
// for root) keeps the previous file and removes the temporary one.
TEST(WriteFileAtomic, FailedWriteKeepsThePreviousFileAndLeavesNoTemporary) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  const int status = InChild([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const Status s = WriteFileAtomic(out, std::string(1 << 20, 'x'));
    ::_exit(!s.ok() && s.message().find("plan.json: write failed") != std::string::npos ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(out), "previous plan");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

TEST(WriteFileAtomic, UnwritableDirectoryFailsCleanly) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions are not enforced";
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  const Status s = WriteFileAtomic(out, "new");
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
    (void)WriteFileAtomic(out, "new plan");
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
TEST(WriteFileAtomic, LeavesAnInstalledHandlerAlone) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  Put(out, "previous plan");
  const int status = InChild([&] {
    static volatile sig_atomic_t seen = 0;
    ::signal(SIGINT, [](int) { seen = 1; });
    internal::SetBeforeRenameHookForTesting([](const std::string&) { ::raise(SIGINT); });
    const Status s = WriteFileAtomic(out, "new plan");
    ::_exit(s.ok() && seen ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(out), "new plan");
  EXPECT_EQ(dir.Names(), std::set<std::string>{"plan.json"});
}

// A std::string path can hold a NUL the file system would cut at.
TEST(ReadTextFile, RejectsAPathWithANulByte) {
  ScratchDir dir;
  Put(dir.Path("a.json"), "{}");
  const std::string path = dir.Path("a.json") + std::string(1, '\0') + "b";
  EXPECT_NE(ReadTextFile(path).status().message().find("the path contains a NUL byte"),
            std::string::npos);
  EXPECT_FALSE(WriteFileAtomic(path, "x").ok());
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
