// Outputs that cannot be written exit 5 with one line naming the output and
// the system's reason: files (-o, --report, --trace) and standard output.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "cli_test_util.h"
#include "remat/io/fd_stream.h"
#include "report_files.h"
#include "standard_output.h"

namespace remat::cli {
namespace {

void ExpectOutputFailed(const Captured& c, const std::string& expected) {
  EXPECT_EQ(c.code, 5) << c.err;
  EXPECT_EQ(c.err.rfind("planner: error: ", 0), 0u) << c.err;
  EXPECT_NE(c.err.find(expected), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
}

TEST(Outputs, AnOutputThatCannotBeWrittenExitsFive) {
  ScratchDir dir;
  ASSERT_EQ(::mkdir(dir.Path("folder").c_str(), 0755), 0);
  const std::string missing = dir.Path("nope/plan.json");
  ExpectOutputFailed(RunCli({"--budget", "24GB", "-o", missing, kExample}),
                     missing + ": cannot write: No such file or directory");
  ExpectOutputFailed(RunCli({"profile", "--analytic", "-o", dir.Path("folder"), kExample}),
                     "folder: is a directory");
  ExpectOutputFailed(RunCli({"pareto", "--points", "2", "-o", missing, kExample}),
                     "nope/plan.json: cannot write");
  if (kHaveVisualize) {
    ExpectOutputFailed(RunCli({"--budget", "24GB", "--trace", missing, kExample}),
                       "nope/plan.json: cannot write");
    ExpectOutputFailed(
        RunCli({"--budget", "24GB", "--pareto-points", "0", "--report", missing, kExample}),
        "nope/plan.json: cannot write");
  }
  EXPECT_EQ(dir.Names(), std::set<std::string>{"folder"});
}

TEST(Outputs, ALinkToDevFullExitsFiveAndStaysALink) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full here";
  ScratchDir dir;
  const std::string link = dir.Path("plan.json");
  ASSERT_EQ(::symlink("/dev/full", link.c_str()), 0);
  ExpectOutputFailed(RunCli({"--budget", "24GB", "-o", link, kExample}),
                     link + " -> /dev/full: write failed: No space left on device");
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// What main() does: the command's output through a checked stream, then
// FinishStandardOutput.
Captured RunWithStdoutOn(int fd, const std::vector<std::string>& args) {
  FdStreamBuf buffer(fd);
  std::ostream out(&buffer);
  std::ostringstream err;
  Environment env;
  env.out = &out;
  env.err = &err;
  const int code = Run(args, env);
  return {FinishStandardOutput(out, buffer, code, env), "", err.str()};
}

TEST(Outputs, StandardOutputOnAFullDiskExitsFive) {
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) GTEST_SKIP() << "no /dev/full here";
  const Captured c = RunWithStdoutOn(full, {"--budget", "24GB", "--json", kExample});
  ::close(full);
  EXPECT_EQ(c.code, 5);
  EXPECT_EQ(c.err, "planner: error: writing standard output: No space left on device\n");
}

TEST(Outputs, StandardOutputWrittenKeepsTheCommandsCode) {
  ScratchDir dir;
  const std::string path = dir.Path("stdout.txt");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const Captured c = RunWithStdoutOn(fd, {"--budget", "6GB", "--chunked-loss", "0", kExample});
  ::close(fd);
  EXPECT_EQ(c.code, 3);  // no plan fits: the report was printed all the same
  EXPECT_EQ(ReadAll(path).rfind("remat plan for gpt2-small", 0), 0u);
}

}  // namespace
}  // namespace remat::cli
