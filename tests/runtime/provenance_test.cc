#include "provenance.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "remat/runtime/torch_runtime.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

const std::string kCapabilities[] = {"DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX",
                                     "SVE128", "SVE256"};

void ExpectCpuProvenance(const Provenance& p) {
  EXPECT_EQ(p.torch_version, std::to_string(TORCH_VERSION_MAJOR) + "." +
                                 std::to_string(TORCH_VERSION_MINOR) + "." +
                                 std::to_string(TORCH_VERSION_PATCH));
  EXPECT_NE(std::find(std::begin(kCapabilities), std::end(kCapabilities), p.cpu_capability),
            std::end(kCapabilities))
      << p.cpu_capability;
  EXPECT_GE(p.intra_op_threads, 1);
  EXPECT_EQ(p.allocator, "cpu-meter");
  EXPECT_TRUE(p.compute_capability.empty());
  EXPECT_TRUE(p.allocator_config.empty());
}

TEST(Provenance, NamesTheLibTorchTheKernelsAndTheThreads) {
  const Provenance p = ProvenanceOf(c10::Device(c10::DeviceType::CPU));
  ExpectCpuProvenance(p);
  // ATEN_CPU_CAPABILITY=default (CI's second pass) selects the unvectorized
  // kernels on any CPU, and the provenance says so.
  const char* asked = std::getenv("ATEN_CPU_CAPABILITY");
  if (asked != nullptr && std::string(asked) == "default") EXPECT_EQ(p.cpu_capability, "DEFAULT");
}

TEST(Provenance, MeasuredProfilesAndRunsCarryIt) {
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  const ModelConfig c = testing::TinyGpt(1);
  MeasureOptions m;
  m.warmup = 0;
  m.repeats = 1;
  Result<Profile> profile = runtime->Measure(c, m);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  ExpectCpuProvenance(profile->provenance);
  TrainOptions t;
  t.steps = 1;
  Result<TrainResult> run =
      runtime->Train(c, testing::PlannerSchedule(*profile, Strategy::kNone), t);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ExpectCpuProvenance(run->provenance);
}

TEST(Provenance, CpuModelNameIsTheFirstProcessors) {
  EXPECT_EQ(CpuModelName("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                         "model name\t: AMD EPYC 9B45 \nprocessor\t: 1\n"
                         "model name\t: other\n"),
            "AMD EPYC 9B45");
  EXPECT_EQ(CpuModelName("processor\t: 0\n"), "");
  EXPECT_EQ(CpuModelName("model name\t:\n"), "");
}

}  // namespace
}  // namespace remat::runtime
