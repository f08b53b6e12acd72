// The runtime on a CUDA device (label "gpu"). Skipped, saying why, where
// LibTorch has no CUDA or no GPU is visible.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "memory_meter.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

#define REMAT_REQUIRE_GPU()                                                        \
  do {                                                                             \
    Result<std::unique_ptr<MemoryMeter>> m = MakeCudaMeter(0);                     \
    if (!m.ok()) GTEST_SKIP() << "no GPU for this test: " << m.status().message(); \
  } while (0)

TEST(GpuMeter, CountsCachingAllocatorBytes) {
  REMAT_REQUIRE_GPU();
  Result<std::unique_ptr<MemoryMeter>> made = MakeCudaMeter(0);
  std::unique_ptr<MemoryMeter> meter = std::move(*made);
  const int64_t before = meter->current_bytes();
  at::Tensor t = at::empty({1 << 20}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  EXPECT_EQ(meter->current_bytes() - before, 4 << 20);
  EXPECT_EQ(meter->AllocationBytes(4 << 20), 4 << 20);
  EXPECT_EQ(meter->AllocationBytes(1), 512);
}

TEST(GpuRuntime, MeasuredProfilePredictsTheMeasuredPeak) {
  REMAT_REQUIRE_GPU();
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  const ModelConfig c = testing::TinyGpt();
  MeasureOptions m;
  m.device = "cuda";
  m.repeats = 2;
  Result<Profile> profile = runtime->Measure(c, m);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  // The provenance names the GPU and its compute capability ("9.0").
  EXPECT_EQ(profile->provenance.allocator, "cuda-caching");
  EXPECT_EQ(profile->provenance.device_name, profile->device);
  EXPECT_NE(profile->provenance.compute_capability.find('.'), std::string::npos);
  for (Strategy s : {Strategy::kNone, Strategy::kUniform, Strategy::kSelective}) {
    const Schedule schedule = testing::PlannerSchedule(*profile, s);
    Result<SimulationResult> predicted = Simulate(*profile, schedule);
    ASSERT_TRUE(predicted.ok());
    TrainOptions t;
    t.device = "cuda";
    t.steps = 2;
    Result<TrainResult> r = runtime->Train(c, schedule, t);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(static_cast<double>(r->peak_bytes), static_cast<double>(predicted->peak_bytes),
                0.05 * static_cast<double>(predicted->peak_bytes))
        << ToString(s);
  }
}

}  // namespace
}  // namespace remat::runtime
