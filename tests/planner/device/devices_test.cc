#include "remat/device/devices.h"

#include <gtest/gtest.h>

#include <string>

#include "analytic/sdpa_backend.h"
#include "remat/device/device_memory.h"

namespace remat {
namespace {

// Every GPU preset carries what its plans need: peaks for the roofline, the
// memory besides tensors, a replayed caching allocator and the compute
// capability that picks the SDPA kernel; the CPU none of the GPU terms.
TEST(DevicePresets, EveryGpuHasPeaksTermsAndACapability) {
  const std::vector<std::string> names = DeviceNames();
  ASSERT_GE(names.size(), 14u);
  for (const std::string& name : names) {
    const DeviceSpec d = LookupDevice(name).value();
    EXPECT_EQ(d.name, name);
    EXPECT_GT(d.tflops_16bit, 0) << name;
    EXPECT_GT(d.tflops_fp32, 0) << name;
    EXPECT_GT(d.bandwidth_gbps, 0) << name;
    EXPECT_GT(d.memory_bytes, 0) << name;
    if (name == "cpu") {
      EXPECT_EQ(d.sm_major, 0);
      EXPECT_EQ(d.cuda_context_bytes, 0);
      EXPECT_FALSE(d.caching_allocator);
      continue;
    }
    // A GPU's dense 16-bit tensor peak is above its fp32 peak.
    EXPECT_GT(d.tflops_16bit, d.tflops_fp32) << name;
    EXPECT_GE(d.sm_major, 8) << name;
    EXPECT_TRUE(d.caching_allocator) << name;
    EXPECT_GT(d.cuda_context_bytes, 0) << name;
    EXPECT_GT(d.workspace_bytes, 0) << name;
    if (!d.host_link.empty()) EXPECT_TRUE(LookupHostLink(d.host_link).ok()) << name;
    EXPECT_TRUE(ResolveDeviceMemory(name, {}).value().replays_allocator()) << name;
  }
}

// The names users type for the cards torchtitan's and most users' runs use
// are accepted, each with its own memory size.
TEST(DevicePresets, AcceptsTheCommonCards) {
  const int64_t gb = 1000 * 1000 * 1000;
  EXPECT_EQ(LookupDevice("h100")->memory_bytes, 80 * gb);
  EXPECT_EQ(LookupDevice("h100-nvl")->memory_bytes, 94 * gb);
  EXPECT_EQ(LookupDevice("gh200")->memory_bytes, 96 * gb);
  EXPECT_EQ(LookupDevice("b200")->memory_bytes, 180 * gb);
  EXPECT_EQ(LookupDevice("mi300x")->memory_bytes, 192 * gb);
  for (const char* name : {"l40s", "l4", "a10g", "rtx3090", "rtx5090"}) {
    EXPECT_TRUE(LookupDevice(name).ok()) << name;
  }
  // Hopper cards share the H200's measured memory besides tensors.
  EXPECT_EQ(LookupDevice("h100")->workspace_bytes, LookupDevice("h200")->workspace_bytes);
  EXPECT_EQ(LookupDevice("gh200")->host_link, "nvlink-c2c");
}

TEST(DevicePresets, UnknownNameListsEveryPreset) {
  const Result<DeviceSpec> bad = LookupDevice("h100-sxm7");
  ASSERT_FALSE(bad.ok());
  const std::string& message = bad.status().message();
  EXPECT_NE(message.find("unknown device 'h100-sxm7'"), std::string::npos);
  for (const std::string& name : DeviceNames()) {
    EXPECT_NE(message.find(name), std::string::npos) << name;
  }
}

// The preset's capability picks the kernel: cuDNN on Hopper and Blackwell
// data-center cards (cuDNN 9.19 preferred there), flash on Ada and Ampere,
// flash on the MI300X (no cuDNN in a ROCm build).
TEST(DevicePresets, CapabilityPicksTheSdpaKernel) {
  analytic::SdpaCall call;
  call.elem_bytes = 2;
  call.bfloat16 = true;
  call.heads = call.kv_heads = 32;
  call.head_dim = 128;
  call.seq_len = 8192;
  const auto backend = [&](const char* device) {
    return std::string(
        analytic::SdpaBackendName(SelectSdpaBackend(analytic::SdpaDeviceFor(device), call)));
  };
  EXPECT_EQ(backend("h100"), "cudnn");
  EXPECT_EQ(backend("gh200"), "cudnn");
  EXPECT_EQ(backend("b200"), "cudnn");
  EXPECT_EQ(backend("l40s"), "flash");
  EXPECT_EQ(backend("rtx3090"), "flash");
  EXPECT_EQ(backend("a100"), "flash");
  EXPECT_EQ(backend("mi300x"), "flash");
  EXPECT_EQ(backend("cpu"), "flash");  // the CPU flash kernel (no dropout)
  EXPECT_FALSE(analytic::SdpaDeviceFor("mi300x").cudnn_version > 0);
}

}  // namespace
}  // namespace remat
