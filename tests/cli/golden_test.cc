// Golden tests: the CLI's report, plan JSON and analytic profile for the
// bundled examples, byte for byte. Cases are listed in tests/golden/CASES;
// regenerate with scripts/update-goldens.sh after an intended change.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

struct GoldenCase {
  std::string golden;
  std::vector<std::string> args;
};

std::vector<GoldenCase> LoadCases() {
  std::vector<GoldenCase> cases;
  std::istringstream in(ReadAll(REMAT_SOURCE_DIR "/tests/golden/CASES"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    GoldenCase c;
    if (!(words >> c.golden)) continue;
    for (std::string w; words >> w;) c.args.push_back(w);
    cases.push_back(c);
  }
  return cases;
}

TEST(Golden, OutputsMatchTheCommittedFiles) {
  const std::vector<GoldenCase> cases = LoadCases();
  ASSERT_GE(cases.size(), 4u);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(REMAT_SOURCE_DIR), 0);  // the outputs show relative input paths
  for (const GoldenCase& c : cases) {
    const Captured got = RunCli(c.args);
    EXPECT_TRUE(got.code == 0 || got.code == 3) << c.golden << ": " << got.err;
    EXPECT_EQ(got.out, ReadAll(c.golden))
        << c.golden << " differs; if the change is intended, run scripts/update-goldens.sh "
        << "and review the diff";
  }
  ASSERT_EQ(::chdir(cwd), 0);
}

}  // namespace
}  // namespace remat::cli
