// PyTorch 2.11's SDPA kernel selection, check by check. Each function names
// the PyTorch check it follows; checks that cannot fail for the calls the
// analytic model makes (dense 4-d tensors, nonzero sequence lengths, last
// dimension contiguous, 256-byte aligned storage) are left out.
#include "analytic/sdpa_backend.h"

#include <algorithm>

#include "remat/device/devices.h"

namespace remat::analytic {
namespace {

bool Sm(const SdpaDevice& d, int major, int minor) {  // compute capability >= major.minor
  return d.sm_major > major || (d.sm_major == major && d.sm_minor >= minor);
}
bool SmAtMost(const SdpaDevice& d, int major, int minor) {
  return d.sm_major < major || (d.sm_major == major && d.sm_minor <= minor);
}

// sdp_utils_cpp.h check_batch_size_and_num_heads_dense<supports_gqa>: equal
// heads, or with enable_gqa (where the backend supports it) kv heads
// dividing the query heads (check_grouped_query_attention).
bool HeadsOk(const SdpaCall& c, bool supports_gqa) {
  if (c.enable_gqa && supports_gqa) return c.kv_heads > 0 && c.heads % c.kv_heads == 0;
  return c.heads == c.kv_heads;
}

bool Is16Bit(const SdpaCall& c) { return c.elem_bytes == 2; }

// sdp_utils_cpp.cpp use_flash_attention_cpp: no dropout (check_for_dropout),
// GQA supported, fp32/fp64/bf16/fp16.
bool CanUseCpuFlash(const SdpaCall& c) {
  return c.dropout <= 0 && HeadsOk(c, true) &&
         (c.elem_bytes == 4 || c.elem_bytes == 8 || c.elem_bytes == 2);
}

// cuda/sdp_utils.cpp can_use_cudnn_attention.
bool CanUseCudnn(const SdpaDevice& d, const SdpaCall& c) {
  if (d.cudnn_version < 90000) return false;
  // cuDNN 9.11-9.13 have no dropout in SDPA.
  if (c.dropout > 0 && d.cudnn_version > 91100 && d.cudnn_version < 91400) return false;
  if (c.deterministic) return false;                       // check_cudnn_deterministic
  if (!Is16Bit(c)) return false;                           // check_dtypes_low_precision
  if (!(Sm(d, 8, 0) && SmAtMost(d, 12, 1))) return false;  // check_cudnn_hardware_support
  if (!HeadsOk(c, true)) return false;  // <supports_gqa, !requires_same_num_heads>
  // check_cudnn_tensor_shapes: head_dim a multiple of 8, at most 128, 256 on
  // sm90.0 from cuDNN 9.10 (q, k and v share head_dim here). 2.11 has no
  // dropout-resolution check (later releases refuse p not a multiple of
  // 1/16: no such message in 2.11's libtorch_cuda.so).
  const bool sm90 = d.sm_major == 9 && d.sm_minor == 0;
  const int64_t limit = sm90 && d.cudnn_version >= 91000 ? 256 : 128;
  if (c.head_dim > limit || c.head_dim % 8 != 0) return false;
  return c.seq_len != 1;
}

// cuda/sdp_utils.cpp can_use_flash_attention.
bool CanUseCudaFlash(const SdpaDevice& d, const SdpaCall& c) {
  if (c.has_mask) return false;                            // check_for_attn_mask
  if (c.head_dim > 256) return false;                      // check_head_dim_size_flash
  if (!(Sm(d, 8, 0) && SmAtMost(d, 12, 1))) return false;  // hardware support
  // check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120.
  const bool sm86_89 = Sm(d, 8, 6) && SmAtMost(d, 8, 9);
  const bool sm120_121 = Sm(d, 12, 0) && SmAtMost(d, 12, 1);
  if (c.requires_grad && (sm86_89 || sm120_121) &&
      !(c.head_dim <= 192 || (c.dropout <= 0 && c.head_dim > 224))) {
    return false;
  }
  if (!Is16Bit(c)) return false;                 // check_dtypes_flash_attention
  if (!Sm(d, 8, 0) && c.bfloat16) return false;  // fp16 only before sm80
  return HeadsOk(c, true);                       // check_batch_size_and_num_heads_dense<true>
}

// cuda/sdp_utils.cpp can_use_mem_efficient_attention.
bool CanUseEfficient(const SdpaDevice& d, const SdpaCall& c) {
  if (!(Sm(d, 5, 0) && SmAtMost(d, 12, 1))) return false;  // hardware support
  // check_head_dim_size_mem_efficient: d a multiple of minimum_gemm_alignment
  // (sm80+: 4 for fp32, 8 for 16-bit; tensor cores from sm70 for 16-bit).
  int64_t alignment = 1;
  if (Sm(d, 8, 0)) alignment = 4;
  const bool tensor_cores = Sm(d, 8, 0) || (Sm(d, 7, 0) && Is16Bit(c));
  if (tensor_cores) alignment = std::max<int64_t>(alignment, Is16Bit(c) ? 8 : 4);
  if (c.head_dim <= 0 || c.head_dim % alignment != 0) return false;
  // check_batch_size_and_num_heads_dense<false>: PyTorch 2.11's efficient
  // kernel takes no grouped keys and values.
  if (!HeadsOk(c, false)) return false;
  if (Sm(d, 8, 0)) return c.elem_bytes == 4 || c.elem_bytes == 2;  // fp16, fp32, bf16
  return c.elem_bytes == 4 || (c.elem_bytes == 2 && !c.bfloat16);
}

// cuda/sdp_utils.cpp check_prefer_cudnn_attention: cuDNN first on sm90 and
// sm10x when the runtime cuDNN is newer than 9.15 (a CUDA 13 build).
bool PrefersCudnn(const SdpaDevice& d) {
  const bool arch = d.sm_major == 9 || d.sm_major == 10;
  const bool minor_ok = d.cuda_version >= 13000 || d.sm_minor == 0 || d.sm_minor == 3;
  return d.cudnn_version > 91500 && arch && minor_ok;
}

}  // namespace

const char* SdpaBackendName(SdpaBackend backend) {
  switch (backend) {
    case SdpaBackend::kMath:
      return "math";
    case SdpaBackend::kFlash:
      return "flash";
    case SdpaBackend::kEfficient:
      return "efficient";
    case SdpaBackend::kCudnn:
      return "cudnn";
  }
  return "math";
}

SdpaDevice SdpaDeviceFor(std::string_view device_name) {
  constexpr int64_t kCudnn919 = 91900;  // nvidia-cudnn-cu13 9.19.0.56, the cu130 wheel's
  const Result<DeviceSpec> spec = LookupDevice(device_name);
  if (!spec.ok() || spec->sm_major == 0) return {};
  return {true, spec->sm_major, spec->sm_minor, spec->cudnn ? kCudnn919 : 0, 13000};
}

SdpaBackend SelectSdpaBackend(const SdpaDevice& device, const SdpaCall& call) {
  if (!device.cuda) {
    // sdp_utils_cpp.cpp priority_order_cpp: flash, then math.
    return CanUseCpuFlash(call) ? SdpaBackend::kFlash : SdpaBackend::kMath;
  }
  // ATen/Context.h sdp_priority_order: flash, efficient, math, cudnn; with
  // check_prefer_cudnn_attention, cudnn, flash, efficient, math.
  if (PrefersCudnn(device) && CanUseCudnn(device, call)) return SdpaBackend::kCudnn;
  if (CanUseCudaFlash(device, call)) return SdpaBackend::kFlash;
  if (CanUseEfficient(device, call)) return SdpaBackend::kEfficient;
  return SdpaBackend::kMath;
}

}  // namespace remat::analytic
