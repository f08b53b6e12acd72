// planner --version: the planner's version and the LibTorch its runtime
// module was built against, without loading the module.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

TEST(Version, NamesTheRuntimesLibTorch) {
  Environment env;
  env.runtime_torch_version = "2.11.0";
  const Captured c = RunCli({"--version"}, env);
  EXPECT_EQ(c.code, 0);
  EXPECT_NE(c.out.find("remat planner 0.1.0"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("runtime: LibTorch 2.11.0 (libremat_runtime.so)\n"), std::string::npos)
      << c.out;
}

TEST(Version, SaysWhenTheRuntimeIsNotBuilt) {
  const Captured c = RunCli({"--version"});
  EXPECT_EQ(c.code, 0);
  EXPECT_NE(c.out.find("runtime: not built\n"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace remat::cli
