// The real `planner` executable with the runtime as a loaded module: train
// runs through libremat_runtime.so found beside the executable, and a module
// that is missing or is not a runtime module is one line and exit code 2.
// These tests link no LibTorch; they run build/bin/planner as a process.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "testing/scratch_dir.h"

namespace remat {
namespace {

const char kTinyModel[] = R"({"name": "tiny-gpt", "architecture": "gpt", "layers": 3,
  "hidden": 32, "heads": 4, "vocab": 64, "seq_len": 16, "micro_batch": 2,
  "precision": "fp32", "optimizer": "adamw", "attention": "eager", "dropout": 0.1})";

struct Process {
  int code = -1;
  std::string out, err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `env_prefix planner args` in `dir`'s files; captures both streams.
Process RunPlanner(const testing::ScratchDir& dir, const std::string& args,
                   const std::string& env_prefix = "") {
  const std::string out = dir.Path("stdout"), err = dir.Path("stderr");
  const std::string command =
      env_prefix + " '" REMAT_PLANNER "' " + args + " > '" + out + "' 2> '" + err + "'";
  const int status = std::system(command.c_str());
  Process p;
  p.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  p.out = ReadAll(out);
  p.err = ReadAll(err);
  return p;
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(PlannerProcess, TrainsThroughTheRuntimeModule) {
  testing::ScratchDir dir;
  const std::string model = dir.Write("tiny.json", kTinyModel);
  const std::string profile = dir.Path("profile.json"), plan = dir.Path("plan.json");
  Process p = RunPlanner(dir, "profile --repeats 1 -o '" + profile + "' '" + model + "'");
  ASSERT_EQ(p.code, 0) << p.err;
  p = RunPlanner(dir, "--strategy uniform -o '" + plan + "' '" + profile + "'");
  ASSERT_EQ(p.code, 0) << p.err;
  p = RunPlanner(dir, "train --plan '" + plan + "' --steps 2 --json '" + model + "'");
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json report = nlohmann::json::parse(p.out);
  EXPECT_GT(report["measured"]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(report["steps"].size(), 2u);
}

TEST(PlannerProcess, PlanningDoesNotLoadTheRuntime) {
  // A module path that cannot load changes nothing for commands that do not
  // run a model.
  testing::ScratchDir dir;
  const Process p = RunPlanner(dir, "--budget 24GB '" REMAT_SOURCE_DIR "/examples/gpt2-small.json'",
                               "REMAT_RUNTIME_MODULE=/nonexistent/libremat_runtime.so");
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("remat plan for gpt2-small"), std::string::npos);
}

TEST(PlannerProcess, AMissingModuleIsOneLineAndExitCode2) {
  testing::ScratchDir dir;
  const std::string model = dir.Write("tiny.json", kTinyModel), plan = dir.Path("plan.json");
  ASSERT_EQ(RunPlanner(dir, "--strategy none -o '" + plan + "' '" + model + "'").code, 0);
  const Process p = RunPlanner(dir, "train --plan '" + plan + "' --steps 1 '" + model + "'",
                               "REMAT_RUNTIME_MODULE=/nonexistent/libremat_runtime.so");
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(Lines(p.err), 1) << p.err;
  EXPECT_EQ(p.err.rfind("planner: error: ", 0), 0u) << p.err;
  EXPECT_NE(p.err.find("/nonexistent/libremat_runtime.so"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("LibTorch runtime module"), std::string::npos) << p.err;
  EXPECT_EQ(p.out, "");
}

TEST(PlannerProcess, ALibraryThatIsNotARuntimeModuleIsOneLineAndExitCode2) {
  // libremat_cpu_meter.so loads (it links c10) but has no entry point.
  testing::ScratchDir dir;
  const std::string model = dir.Write("tiny.json", kTinyModel);
  const Process p = RunPlanner(dir, "profile -o '" + dir.Path("p.json") + "' '" + model + "'",
                               "REMAT_RUNTIME_MODULE='" REMAT_NOT_A_MODULE "'");
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(Lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find("has no entry point remat_runtime_abi_v1"), std::string::npos) << p.err;
  EXPECT_FALSE(std::ifstream(dir.Path("p.json")).good());
}

}  // namespace
}  // namespace remat
