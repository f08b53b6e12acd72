// Running the CLI in-process, and scratch files for its tests.
#ifndef REMAT_TESTS_CLI_CLI_TEST_UTIL_H_
#define REMAT_TESTS_CLI_CLI_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "testing/scratch_dir.h"

namespace remat::cli {

struct Captured {
  int code = 0;
  std::string out, err;
};

// Runs `planner <args>` in process with `env`'s settings (runtime,
// progress); its out and err are captured.
inline Captured RunCli(const std::vector<std::string>& args, Environment env = {}) {
  std::ostringstream out, err;
  env.out = &out;
  env.err = &err;
  const int code = Run(args, env);
  return {code, out.str(), err.str()};
}

using remat::testing::ScratchDir;

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

const char kExample[] = REMAT_SOURCE_DIR "/examples/gpt2-small.json";

}  // namespace remat::cli

#endif  // REMAT_TESTS_CLI_CLI_TEST_UTIL_H_
