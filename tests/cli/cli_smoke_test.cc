#include <gtest/gtest.h>

#include <sstream>

#include "cli.h"

namespace remat::cli {
namespace {

struct Captured {
  int code;
  std::string out, err;
};

Captured RunCli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Environment env;
  env.out = &out;
  env.err = &err;
  const int code = Run(args, env);
  return {code, out.str(), err.str()};
}

TEST(Cli, PlansTheBundledExample) {
  const Captured c = RunCli({"--budget", "24GB", REMAT_SOURCE_DIR "/examples/gpt2-small.json"});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("24,000,000,000 bytes"), std::string::npos);
  EXPECT_NE(c.out.find("Without checkpointing"), std::string::npos);
}

}  // namespace
}  // namespace remat::cli
