// The SDPA kernel PyTorch 2.11 picks, case by case, against its dispatch
// rules written out here. Sources (PyTorch 2.11.0, git 70d99e99):
//   [cpu]   aten/src/ATen/native/transformers/sdp_utils_cpp.cpp: priority
//           flash, math; use_flash_attention_cpp refuses dropout
//           (check_for_dropout), accepts enable_gqa with kv heads dividing
//           the query heads (check_batch_size_and_num_heads_dense<true>) and
//           fp32/fp64/bf16/fp16. Checked against torch 2.11's own
//           torch._fused_sdp_choice on CPU tensors (dtype x GQA x dropout x
//           head_dim 32/64/80: math exactly when dropout > 0 or GQA heads
//           without enable_gqa).
//   [order] ATen/Context.h sdp_priority_order: flash, efficient, math,
//           cudnn; cuda/sdp_utils.cpp check_prefer_cudnn_attention puts
//           cudnn first on sm90/sm10x when the runtime cuDNN is > 9.15 (the
//           cu130 wheel ships 9.19).
//   [cudnn] can_use_cudnn_attention: fp16/bf16 (check_dtypes_low_precision),
//           head_dim a multiple of 8 and <= 128, <= 256 on sm90 from cuDNN
//           9.10 (check_cudnn_tensor_shapes), GQA, any dropout but on cuDNN
//           9.11-9.13 (the 1/16 dropout check of later releases is not in
//           2.11's libtorch_cuda.so).
//   [flash] can_use_flash_attention: no mask, head_dim <= 256, sm80..sm121,
//           fp16/bf16 (check_dtypes_flash_attention), GQA; on sm86-89 with
//           grad head_dim <= 192 (or > 224 without dropout).
//   [eff]   can_use_mem_efficient_attention: fp32/fp16/bf16 on sm80+,
//           head_dim a multiple of 4 (fp32) / 8 (16-bit), and no GQA: 2.11's
//           efficient kernel instantiates check_batch_size_and_num_heads_dense
//           <false> (sdp_utils_cpp.h:378-433; the symbols of libtorch_cuda.so:
//           <0,1> efficient, <1,1> flash, <1,0> cudnn).
#include "analytic/sdpa_backend.h"

#include <gtest/gtest.h>

namespace remat {
namespace {

using analytic::SdpaBackend;
using analytic::SdpaBackendName;
using analytic::SdpaCall;
using analytic::SdpaDevice;
using analytic::SdpaDeviceFor;
using analytic::SelectSdpaBackend;

struct Case {
  const char* device;
  int elem_bytes;
  bool bf16;
  int64_t heads, kv_heads;
  bool enable_gqa;
  double dropout;
  int64_t head_dim;
  const char* expected;
  const char* rule;
};

TEST(SdpaBackend, PyTorch211PicksPerDeviceDtypeGqaDropoutAndHeadDim) {
  const Case cases[] = {
      // CPU: flash unless dropout [cpu].
      {"cpu", 4, false, 8, 8, false, 0.0, 64, "flash", "cpu flash takes fp32"},
      {"cpu", 4, false, 8, 2, true, 0.0, 32, "flash", "cpu flash takes GQA"},
      {"cpu", 4, false, 8, 8, false, 0.1, 64, "math", "check_for_dropout"},
      {"cpu", 2, true, 8, 8, false, 0.0, 80, "flash", "cpu flash takes bf16, any d"},
      {"cpu", 2, true, 8, 2, true, 0.1, 64, "math", "check_for_dropout"},
      // H200 (sm90, cuDNN 9.19: cudnn first) [order].
      {"h200", 4, false, 8, 2, true, 0.0, 32, "math", "fp32: no cudnn/flash; GQA: no efficient"},
      {"h200", 4, false, 8, 8, false, 0.0, 32, "efficient", "fp32 d % 4 == 0"},
      {"h200", 4, false, 12, 12, false, 0.1, 32, "efficient", "fp32 with dropout"},
      {"h200", 4, false, 4, 4, false, 0.1, 64, "efficient", "bert-mlm-s fp32"},
      {"h200", 4, false, 8, 8, false, 0.0, 30, "math", "fp32 d % 4 != 0"},
      {"h200", 2, false, 12, 12, false, 0.1, 64, "cudnn", "distilroberta amp_fp16"},
      {"h200", 2, false, 12, 12, false, 0.0, 64, "cudnn", "cudnn preferred on sm90"},
      {"h200", 2, true, 32, 8, true, 0.0, 128, "cudnn", "cudnn takes GQA"},
      {"h200", 2, true, 32, 8, true, 0.1, 128, "cudnn", "cudnn takes dropout"},
      {"h200", 2, true, 16, 16, false, 0.0, 264, "efficient", "cudnn and flash d <= 256"},
      {"h200", 2, true, 16, 16, false, 0.0, 256, "cudnn", "cudnn d <= 256 on sm90"},
      {"h200", 2, true, 16, 4, true, 0.1, 256, "cudnn", "cudnn d <= 256 on sm90, GQA"},
      {"h200", 2, true, 16, 16, false, 0.0, 512, "efficient", "flash d <= 256"},
      {"h200", 2, true, 16, 4, true, 0.0, 512, "math", "d > 256 GQA: nothing fused"},
      {"h200", 2, true, 16, 16, false, 0.0, 36, "flash", "cudnn: d % 8; flash pads d"},
      // A100 (sm80: default order, cudnn last).
      {"a100", 2, true, 12, 12, false, 0.0, 64, "flash", "flash first"},
      {"a100", 4, false, 12, 12, false, 0.0, 64, "efficient", "fp32"},
      {"a100", 4, false, 8, 2, true, 0.0, 64, "math", "fp32 GQA"},
      {"a100", 2, true, 32, 8, true, 0.1, 128, "flash", "flash takes GQA"},
      {"a100", 2, true, 16, 16, false, 0.0, 256, "flash", "flash d <= 256"},
      {"a100", 2, true, 16, 4, true, 0.0, 512, "math", "d > 256 with GQA"},
      // RTX 4090 (sm89): flash refuses training with 192 < d <= 224.
      {"rtx4090", 2, true, 8, 8, false, 0.0, 208, "efficient", "sm86-89 flash d in (192,224]"},
      {"rtx4090", 2, true, 8, 8, false, 0.0, 240, "flash", "d > 224 without dropout"},
      {"rtx4090", 2, true, 8, 8, false, 0.1, 240, "efficient", "d > 224 with dropout"},
      {"rtx4090", 2, true, 8, 8, false, 0.1, 128, "flash", "d <= 192"},
  };
  for (const Case& c : cases) {
    SdpaCall call;
    call.elem_bytes = c.elem_bytes;
    call.bfloat16 = c.bf16;
    call.heads = c.heads;
    call.kv_heads = c.kv_heads;
    call.enable_gqa = c.enable_gqa;
    call.dropout = c.dropout;
    call.head_dim = c.head_dim;
    call.seq_len = 128;
    EXPECT_STREQ(SdpaBackendName(SelectSdpaBackend(SdpaDeviceFor(c.device), call)), c.expected)
        << c.device << " bytes " << c.elem_bytes << " heads " << c.heads << "/" << c.kv_heads
        << " dropout " << c.dropout << " d " << c.head_dim << ": " << c.rule;
  }
}

// cuDNN 9.11-9.13 refuse dropout; the preference needs cuDNN > 9.15
// [order].
TEST(SdpaBackend, CudnnVersionDecidesItsTurn) {
  SdpaDevice h200 = SdpaDeviceFor("h200");
  SdpaCall call;
  call.elem_bytes = 2;
  call.heads = call.kv_heads = 12;
  call.head_dim = 64;
  call.seq_len = 75;
  EXPECT_EQ(SelectSdpaBackend(h200, call), SdpaBackend::kCudnn);
  h200.cudnn_version = 91500;  // not preferred: flash first
  EXPECT_EQ(SelectSdpaBackend(h200, call), SdpaBackend::kFlash);
  h200.cudnn_version = 91200;  // no dropout in 9.11-9.13, and not preferred
  call.dropout = 0.1;
  EXPECT_EQ(SelectSdpaBackend(h200, call), SdpaBackend::kFlash);
  h200.cudnn_version = 91900;
  EXPECT_EQ(SelectSdpaBackend(h200, call), SdpaBackend::kCudnn);
  call.deterministic = true;  // check_cudnn_deterministic
  EXPECT_EQ(SelectSdpaBackend(h200, call), SdpaBackend::kFlash);
  call.has_mask = true;  // flash takes no mask; efficient does
  EXPECT_EQ(SelectSdpaBackend(h200, call), SdpaBackend::kEfficient);
}

}  // namespace
}  // namespace remat
