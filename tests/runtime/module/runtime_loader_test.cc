// Where the CLI's runtime comes from, in process: the module's path, a
// loader that cannot load, and a planner built without the runtime.
#include "runtime_loader.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>
#include <string>

namespace remat::cli {
namespace {

TEST(RuntimeLoader, ModulePathIsBesideTheExecutableUnlessTheEnvironmentSaysOtherwise) {
  ::unsetenv("REMAT_RUNTIME_MODULE");
  const std::string path = RuntimeModulePath();
  EXPECT_NE(path.find("/../lib/libremat_runtime.so"), std::string::npos) << path;
  EXPECT_EQ(path.rfind('/', 0), 0u) << path;  // absolute
  ::setenv("REMAT_RUNTIME_MODULE", "/opt/x/libremat_runtime.so", 1);
  EXPECT_EQ(RuntimeModulePath(), "/opt/x/libremat_runtime.so");
  ::setenv("REMAT_RUNTIME_MODULE", "", 1);  // empty: the default
  EXPECT_EQ(RuntimeModulePath(), path);
  ::unsetenv("REMAT_RUNTIME_MODULE");
}

TEST(RuntimeLoader, AModuleThatDoesNotLoadIsTheSameOneLineErrorEveryTime) {
  RuntimeLoader loader("/nonexistent/libremat_runtime.so");
  const Result<Runtime*> first = loader.Get();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(first.status().message().find("/nonexistent/libremat_runtime.so"), std::string::npos);
  EXPECT_EQ(first.status().message().find('\n'), std::string::npos);
  const Result<Runtime*> second = loader.Source()();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), first.status().message());
}

TEST(RuntimeLoader, APlannerBuiltWithoutTheRuntimeSaysSoForAMeasuredProfile) {
  std::ostringstream out, err;
  Environment env;  // no RuntimeSource: built without the runtime
  env.out = &out;
  env.err = &err;
  const int code = cli::Run({"profile", "-o", "/nonexistent/p.json",
                             REMAT_SOURCE_DIR "/bench/fidelity/models/cpu-s.json"},
                            env);
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.str().find("needs the LibTorch runtime, and this planner was built without it"),
            std::string::npos)
      << err.str();
}

}  // namespace
}  // namespace remat::cli
