// planner/cli/traced_input.cc: a config.json whose model_type has no
// hand-written model is planned from `$REMAT_PYTHON -m remat trace`'s
// profile, cached by the config and the job flags (any config.json under
// --compile, traced with --compile); without a tracer it is
// refused with one line saying how to trace it. The tracer here is a shell
// script standing in for Python (it logs its arguments and writes a
// profile), so that the test needs no torch; remat_trace_test.py runs the
// real one.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kProfile[] = R"({"model": "traced-mpnet", "source": "traced", "device": "a100",
  "static_bytes": 1000, "layers": [{"name": "block0", "kind": "block", "forward_ms": 1,
  "backward_ms": 2, "input_bytes": 10, "output_bytes": 10, "activation_bytes": 30,
  "forward_workspace_bytes": 0, "backward_workspace_bytes": 0}]})";

class TracedInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("profile.json", kProfile);
    tracer_ = dir_.Write("tracer.sh", "#!/bin/sh\necho \"$@\" >> '" + dir_.Path("calls") +
                                          "'\ncp '" + dir_.Path("profile.json") + "' \"$6\"\n");
    ::chmod(tracer_.c_str(), 0755);
    config_ = dir_.Write("config.json", R"({"model_type": "mpnet", "hidden_size": 64})");
    ::setenv("REMAT_TRACE_CACHE", dir_.Path("cache").c_str(), 1);
    ::setenv("REMAT_PYTHON", tracer_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("REMAT_TRACE_CACHE");
    ::unsetenv("REMAT_PYTHON");
  }
  int Calls() const {
    const std::string log = ReadAll(dir_.Path("calls"));
    int n = 0;
    for (char c : log) n += c == '\n';
    return n;
  }

  ScratchDir dir_;
  std::string tracer_, config_;
};

TEST_F(TracedInput, PlansTheTracedProfileOncePerConfigAndJob) {
  const Captured first = RunCli({"--budget", "1GB", "--micro-batch", "4", config_});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("traced profile"), std::string::npos) << first.out;
  ASSERT_EQ(Calls(), 1);
  const std::string calls = ReadAll(dir_.Path("calls"));
  EXPECT_NE(calls.find("-m remat trace " + config_ + " -o "), std::string::npos) << calls;
  EXPECT_NE(calls.find("--micro-batch 4"), std::string::npos) << calls;
  // The same config and job: the cached trace; another micro-batch: a new one.
  ASSERT_EQ(RunCli({"--budget", "1GB", "--micro-batch", "4", config_}).code, 0);
  EXPECT_EQ(Calls(), 1);
  ASSERT_EQ(RunCli({"--budget", "1GB", "--micro-batch", "8", config_}).code, 0);
  EXPECT_EQ(Calls(), 2);
}

TEST_F(TracedInput, GraphTraceNotesPrintedOnce) {
  // A graph profile whose chains carry the trace's note (transformers'
  // default T5 config: its decoder started at pad_token_id).
  nlohmann::json graph =
      nlohmann::json::parse(ReadAll(REMAT_SOURCE_DIR "/examples/graphs/encoder-decoder.json"));
  const char note[] = "decoder_start_token_id missing: pad_token_id (0) taken";
  for (nlohmann::json& chain : graph["chains"]) chain["profile"]["trace"]["assumed"] = {note};
  dir_.Write("profile.json", graph.dump());
  const Captured r = RunCli({"--budget", "3GiB", config_});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string line = std::string("planner: note: traced: ") + note + "\n";
  ASSERT_NE(r.err.find(line), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line, r.err.find(line) + 1), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("2 chains, forward encoder -> decoder"), std::string::npos) << r.out;
}

TEST_F(TracedInput, HandWrittenFamiliesAreNotTraced) {
  const std::string gpt2 =
      dir_.Write("gpt2.json", R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
                       "n_positions": 128, "vocab_size": 100})");
  ASSERT_EQ(RunCli({"--budget", "1GB", gpt2}).code, 0);
  EXPECT_EQ(Calls(), 0);
}

TEST_F(TracedInput, WithoutATracerRefusedWithHowToTrace) {
  ::setenv("REMAT_PYTHON", dir_.Path("no-such-python").c_str(), 1);
  const Captured r = RunCli({"--budget", "1GB", config_});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model_type \"mpnet\" has no hand-written model; trace it: python -m "
                       "remat trace " +
                       config_ + " -o profile.json"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST_F(TracedInput, CompileTracesAnyModelTypeCachedApartFromEager) {
  const std::string gpt2 =
      dir_.Write("gpt2.json", R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
                       "n_positions": 128, "vocab_size": 100})");
  const Captured r = RunCli({"--budget", "1GB", "--compile", gpt2});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(Calls(), 1);
  const std::string calls = ReadAll(dir_.Path("calls"));
  EXPECT_NE(calls.find("-m remat trace " + gpt2 + " -o "), std::string::npos) << calls;
  EXPECT_NE(calls.find("--compile"), std::string::npos) << calls;
  // The eager trace of a config is another cache entry than its compiled one.
  ASSERT_EQ(RunCli({"--budget", "1GB", "--compile", config_}).code, 0);
  ASSERT_EQ(RunCli({"--budget", "1GB", "--compile", config_}).code, 0);
  EXPECT_EQ(Calls(), 2);
  ASSERT_EQ(RunCli({"--budget", "1GB", config_}).code, 0);
  EXPECT_EQ(Calls(), 3);
}

TEST_F(TracedInput, CompileWithoutATracerRefusedInOneLine) {
  ::setenv("REMAT_PYTHON", dir_.Path("no-such-python").c_str(), 1);
  const Captured r = RunCli({"--budget", "1GB", "--compile", config_});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(config_ + ": --compile plans the step torch.compile runs, traced by "
                       "python -m remat trace --compile (needs torch and transformers)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST_F(TracedInput, CompileTracesASentenceTransformersJobWithItsFlags) {
  // A sentence-transformers job (the config's remat block, or the flags):
  // the tracer runs that job's step, given the flags; the block it reads
  // itself.
  const std::string st = dir_.Write(
      "st.json", R"({"model_type": "bert", "remat": {"head": "pooling", "loss": "mnrl"}})");
  Captured r = RunCli({"--budget", "1GB", "--compile", st});
  ASSERT_EQ(r.code, 0) << r.err;
  r = RunCli({"--budget", "1GB", "--compile", "--head", "pooling", "--loss", "mnrl",
              "--texts-per-example", "3", "--merge-columns", "false", config_});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(Calls(), 2);
  const std::string calls = ReadAll(dir_.Path("calls"));
  EXPECT_NE(calls.find("--head pooling --loss mnrl --texts-per-example 3 --merge-columns false"),
            std::string::npos)
      << calls;
  // Another job of the same config is another trace.
  ASSERT_EQ(RunCli({"--budget", "1GB", "--compile", "--head", "pooling", "--loss", "mnrl",
                    "--texts-per-example", "2", config_})
                .code,
            0);
  EXPECT_EQ(Calls(), 3);
}

TEST_F(TracedInput, CompileRefusesAJobTheTracedStepDoesNotRun) {
  // A classification job (the config's remat block, or the flag): the
  // tracer runs the model's own step or a sentence-transformers one.
  const std::string cls = dir_.Write(
      "cls.json", R"({"model_type": "bert", "remat": {"head": "classification"}})");
  Captured r = RunCli({"--budget", "1GB", "--compile", cls});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("option --compile: " + cls + ": remat.head classification is not traced"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  r = RunCli({"--budget", "1GB", "--compile", "--num-labels", "3", config_});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--num-labels 3 is not traced"), std::string::npos) << r.err;
  EXPECT_EQ(Calls(), 0);
  // The language-modelling step's own settings are traced.
  const std::string lm = dir_.Write(
      "lm.json", R"({"model_type": "gpt2", "remat": {"head": "lm", "texts_per_example": 1}})");
  r = RunCli({"--budget", "1GB", "--compile", lm});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(TracedInput, CompileRefusesAProfile) {
  const Captured r = RunCli({"--budget", "1GB", "--compile", dir_.Path("profile.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("option --compile: " + dir_.Path("profile.json") +
                       " is not a Hugging Face config.json"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Calls(), 0);
}

}  // namespace
}  // namespace remat::cli
