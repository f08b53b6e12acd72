// Activation offload on the CPU runtime (schedule.h kOffload / kPrefetch,
// host_pool.h): a tiny GPT with every block boundary checkpointed and every
// checkpoint offloaded runs to the simulator's bytes from a measured
// profile, drops the device peak by what the simulator says against the
// same plan kept on the device, gives the same loss and gradients bit for
// bit, and leaves the host pool empty.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "chain_model.h"
#include "cli_test_util.h"
#include "host_pool.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "profiler.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// A view's whole storage leaves the metered allocator and comes back with
// its sizes, strides and offset.
TEST(HostPool, MovesAWholeStorageOutOfTheMeterAndBack) {
  MemoryMeter& meter = CpuMeter();
  HostPool pool{at::Device(at::kCPU)};
  // Strided over part of its storage (set_: not a view, which would keep
  // its base and so the storage elsewhere).
  at::Tensor x = at::empty({0}, at::kFloat);
  x.set_(at::arange(24, at::kFloat).storage(), 1, {4, 4}, {6, 1});
  const at::Tensor expected = x.clone();
  const int64_t before = meter.current_bytes(), buffers = HostPool::CpuBufferBytes();
  pool.Offload(3, x);
  x = at::Tensor();
  EXPECT_EQ(meter.current_bytes(), before - 96);  // 24 floats, not the view's 16
  EXPECT_EQ(pool.bytes(), 96);
  EXPECT_TRUE(pool.holds(3));
  EXPECT_EQ(HostPool::CpuBufferBytes(), buffers + 96);
  const at::Tensor back = pool.Prefetch(3);
  EXPECT_EQ(meter.current_bytes(), before);
  EXPECT_TRUE(at::equal(back, expected));
  EXPECT_EQ(back.strides().vec(), std::vector<int64_t>({6, 1}));
  EXPECT_EQ(back.storage_offset(), 1);
  EXPECT_EQ(pool.bytes(), 0);
  EXPECT_EQ(pool.peak_bytes(), 96);
  EXPECT_EQ(HostPool::CpuBufferBytes(), buffers);
}

TEST(HostPool, RefusesAStorageHeldElsewhere) {
  HostPool pool{at::Device(at::kCPU)};
  const at::Tensor x = at::ones({8});
  const at::Tensor view = x.narrow(0, 0, 4);
  EXPECT_THROW(pool.Offload(1, x), std::invalid_argument);
  EXPECT_THROW(pool.Prefetch(1), std::invalid_argument);
  EXPECT_EQ(pool.bytes(), 0);
}

// The checkpoints of `s`: the x[i] InsertOffloads accepts.
std::vector<int> Checkpoints(const Schedule& s) {
  std::vector<int> xs;
  for (int i = 1; i < s.num_layers; ++i) {
    if (InsertOffloads(s, {i}, 0).ok()) xs.push_back(i);
  }
  return xs;
}

struct Measured {
  StepResult step;
  std::vector<at::Tensor> grads;  // after the step, without an update
};

// One step of `s` on a fresh model (same seeds each time). With an
// optimizer, as training runs it (the gradients are then gone).
Measured RunOnce(const ModelConfig& c, const Schedule& s, bool update) {
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 3);
  if (model->persistent_gradients()) model->AllocateGradients();
  std::unique_ptr<ModelOptimizer> optimizer;
  if (update) optimizer = std::make_unique<ModelOptimizer>(Optimizer::kAdamW, model->parameters());
  ScheduleExecutor executor(*model, optimizer.get(), CpuMeter(), 3);
  Result<StepResult> r = executor.RunStep(s, model->MakeBatch(3, 0), 0);
  EXPECT_TRUE(r.ok()) << r.status().message();
  Measured m;
  if (r.ok()) m.step = std::move(*r);
  if (!update) {
    for (const at::Tensor& p : model->parameters()) m.grads.push_back(p.grad().clone());
  }
  return m;
}

// Peak above the step's first op's bytes (the model state and the batch),
// measured and simulated alike.
int64_t MeasuredPeak(const StepResult& r) { return r.peak_bytes - r.ops.front().live_before; }
int64_t SimulatedPeak(const SimulationResult& s) {
  return s.peak_bytes - s.timeline.front().live_before;
}

class Offload : public ::testing::TestWithParam<Gradients> {
 protected:
  void SetUp() override {
    config_ = testing::TinyGpt();
    config_.gradients = GetParam();
    MeasureOptions m;
    m.warmup = 0;
    m.repeats = 1;
    Result<Profile> p = MeasureProfile(config_, m, Timing{}, CpuMeter());
    ASSERT_TRUE(p.ok()) << p.status().message();
    profile_ = *p;
    PlanOptions o;
    o.strategy = Strategy::kUniform;
    o.every = 1;
    Result<PlanSet> plans = MakePlan(profile_, o);
    ASSERT_TRUE(plans.ok()) << plans.status().message();
    kept_ = plans->chosen.schedule;
    xs_ = Checkpoints(kept_);
    ASSERT_GE(xs_.size(), 3u);  // between the blocks at least
    Result<Schedule> moved = InsertOffloads(kept_, xs_, 0);
    ASSERT_TRUE(moved.ok()) << moved.status().message();
    offloaded_ = *moved;
  }

  ModelConfig config_;
  Profile profile_;
  Schedule kept_, offloaded_;
  std::vector<int> xs_;
};

TEST_P(Offload, TheProfileMeasuresTheCpuLink) {
  const HostLink& link = profile_.host_link;
  EXPECT_EQ(link.name, "cpu-memcpy");
  EXPECT_GT(link.gb_per_s, 0);
  EXPECT_GE(link.latency_us, 0);
  EXPECT_FALSE(link.overlapped);
  Result<SimulationResult> sim = Simulate(profile_, offloaded_);
  ASSERT_TRUE(sim.ok()) << sim.status().message();
  EXPECT_GT(sim->transfer_ms, 0);
}

TEST_P(Offload, DevicePeakIsTheSimulatedOneAndDropsByTheOffloadedBytes) {
  Result<SimulationResult> sim_kept = Simulate(profile_, kept_);
  Result<SimulationResult> sim_off = Simulate(profile_, offloaded_);
  ASSERT_TRUE(sim_kept.ok() && sim_off.ok());
  const int64_t before = HostPool::CpuBufferBytes();
  const Measured kept = RunOnce(config_, kept_, true);
  const Measured off = RunOnce(config_, offloaded_, true);
  ASSERT_EQ(off.step.ops.size(), sim_off->timeline.size());

  // Each copy moves exactly the checkpoint's bytes, as simulated.
  for (size_t k = 0; k < offloaded_.ops.size(); ++k) {
    const Op& op = offloaded_.ops[k];
    if (op.kind != OpKind::kOffload && op.kind != OpKind::kPrefetch) continue;
    const OpSample& m = off.step.ops[k];
    const TimelinePoint& t = sim_off->timeline[k];
    EXPECT_EQ(m.live_after - m.live_before, t.live_after - t.live_before) << DescribeOp(op);
    EXPECT_EQ(m.peak - m.live_before, t.peak - t.live_before) << DescribeOp(op);
  }
  const int64_t measured = MeasuredPeak(off.step), simulated = SimulatedPeak(*sim_off);
  const int64_t saved = MeasuredPeak(kept.step) - measured;
  EXPECT_EQ(saved, SimulatedPeak(*sim_kept) - simulated);
  const std::string where = "peak at op " + std::to_string(sim_off->peak_op) + " (" +
                            DescribeOp(offloaded_.ops[sim_off->peak_op]) + ")";
  if (GetParam() == Gradients::kPersistent) {
    // The step peaks in block3's backward, x2 and x3 on the host (8,192 B
    // on this tiny model): exact to the byte.
    EXPECT_EQ(measured, simulated) << where;
    EXPECT_GT(saved, 0);
  } else {
    // Here the step peaks in block0's backward, which creates its
    // gradients beside all the others, with no checkpoint on the device:
    // offload saves nothing there (saved == 0, as simulated), exact too
    // (the block's negative workspace: backward_release_test.cc).
    EXPECT_EQ(measured, simulated) << where;
  }

  EXPECT_EQ(off.step.host_peak_bytes, sim_off->host_peak_bytes);
  EXPECT_GT(off.step.host_peak_bytes, 0);
  EXPECT_EQ(off.step.host_left_bytes, 0);
  EXPECT_EQ(kept.step.host_peak_bytes, 0);
  EXPECT_EQ(HostPool::CpuBufferBytes(), before);  // no host buffer outlives the step
}

TEST_P(Offload, LossAndGradientsAreThoseOfTheSamePlanOnTheDevice) {
  const Measured kept = RunOnce(config_, kept_, false);
  const Measured off = RunOnce(config_, offloaded_, false);
  EXPECT_EQ(off.step.loss, kept.step.loss);
  ASSERT_EQ(off.grads.size(), kept.grads.size());
  for (size_t i = 0; i < kept.grads.size(); ++i) {
    EXPECT_TRUE(at::equal(off.grads[i], kept.grads[i])) << "parameter " << i;
  }
}

TEST_P(Offload, AReadOfAnOffloadedCheckpointNamesIt) {
  Schedule s = offloaded_;
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind == OpKind::kPrefetch && s.ops[k].tensor.index == xs_.back()) {
      s.ops.erase(s.ops.begin() + static_cast<std::ptrdiff_t>(k));
      break;
    }
  }
  std::unique_ptr<ChainModel> model = MakeChainModel(config_, at::Device(at::kCPU), 3);
  ScheduleExecutor executor(*model, nullptr, CpuMeter(), 3);
  const int64_t before = CpuMeter().current_bytes();
  Result<StepResult> r = executor.RunStep(s, model->MakeBatch(3, 0), 0);
  ASSERT_FALSE(r.ok());
  model->ReleaseGradients();  // those the backwards before the failure made
  EXPECT_NE(r.status().message().find("needs x" + std::to_string(xs_.back()) +
                                      ", which is offloaded (no prefetch before this op)"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(CpuMeter().current_bytes(), before);
  EXPECT_EQ(HostPool::CpuBufferBytes(), 0);
}

// Gradients created in backward (PyTorch's default) and persistent buffers.
INSTANTIATE_TEST_SUITE_P(Tiny, Offload,
                         ::testing::Values(Gradients::kCreatedInBackward, Gradients::kPersistent),
                         [](const auto& info) {
                           return info.param == Gradients::kPersistent ? "persistent"
                                                                       : "created_in_backward";
                         });

// `planner train --plan` runs a plan file whose schedule offloads (the
// planner's uniform plan with offloads inserted) and reports the host
// memory beside the device peak, predicted and measured.
TEST(OffloadTrain, APlanFileThatOffloadsTrainsAndReportsTheHostPeak) {
  static std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  cli::Environment env;
  env.runtime = []() -> Result<Runtime*> { return runtime.get(); };
  cli::ScratchDir dir;
  const std::string model = dir.Write("tiny.json", R"({"name": "tiny-gpt", "architecture": "gpt",
    "layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seq_len": 32, "micro_batch": 2,
    "precision": "fp32", "optimizer": "adamw", "dropout": 0.1})");
  const std::string profile = dir.Path("profile.json"), plan = dir.Path("plan.json");
  const cli::Captured p = cli::RunCli({"profile", "--repeats", "1", "-o", profile, model}, env);
  ASSERT_EQ(p.code, 0) << p.err;
  const cli::Captured planned = cli::RunCli({"--every", "1", "-o", plan, profile}, env);
  ASSERT_EQ(planned.code, 0) << planned.err;
  nlohmann::json j = nlohmann::json::parse(cli::ReadAll(plan));
  ASSERT_TRUE(j["profile"].contains("host_link")) << "a measured profile carries its link";
  const int L = static_cast<int>(j["profile"]["layers"].size());
  Result<Schedule> kept = ParseScheduleJson(j["schedule"].dump(), L, plan);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  Result<Schedule> moved = InsertOffloads(*kept, Checkpoints(*kept), 0);
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  j["schedule"] = nlohmann::json::parse(ScheduleToJson(*moved));
  std::ofstream(plan) << j.dump();

  const cli::Captured c =
      cli::RunCli({"train", "--plan", plan, "--steps", "2", "--json", model}, env);
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json r = nlohmann::json::parse(c.out);
  const int64_t host = r["predicted"]["host_peak_bytes"];
  EXPECT_GT(host, 0);
  EXPECT_EQ(r["measured"]["host_peak_bytes"], host);
  EXPECT_GT(r["predicted"]["transfer_ms"].get<double>(), 0);
  const int64_t predicted = r["predicted"]["peak_bytes"], measured = r["measured"]["peak_bytes"];
  EXPECT_NEAR(measured, predicted, 0.01 * predicted);
  const cli::Captured text = cli::RunCli({"train", "--plan", plan, "--steps", "1", model}, env);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("host memory"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace remat::runtime
