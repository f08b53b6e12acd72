// Which kernel PyTorch 2.11's scaled_dot_product_attention runs, and why.
// Internal to the planner: the analytic model resolves `attention: sdpa` to
// one backend per attention call, then models what that backend keeps for
// backward (graph_builder.cc).
//
// The rules are PyTorch 2.11's dispatch (aten/src/ATen/native/transformers/
// sdp_utils_cpp.{h,cpp} for the CPU, cuda/sdp_utils.cpp for CUDA), written
// out as data: docs/analytic-model.md ("Which SDPA kernel") cites them.
#ifndef REMAT_SRC_ANALYTIC_SDPA_BACKEND_H_
#define REMAT_SRC_ANALYTIC_SDPA_BACKEND_H_

#include <cstdint>
#include <string_view>

namespace remat::analytic {

enum class SdpaBackend {
  kMath,       // the composite: q k^T, softmax, dropout, . v, each an autograd op
  kFlash,      // FlashAttention-2 (CUDA) or the CPU flash kernel
  kEfficient,  // memory-efficient attention (xformers' CUTLASS kernel, CUDA)
  kCudnn,      // cuDNN's fused attention (CUDA)
};
// "math", "flash", "efficient", "cudnn".
const char* SdpaBackendName(SdpaBackend backend);

// Where the call runs. A CPU (cuda false) ignores the other fields.
struct SdpaDevice {
  bool cuda = false;
  int sm_major = 0;  // compute capability, e.g. 9.0 for an H200
  int sm_minor = 0;
  // The runtime cuDNN as cudnnGetVersion() spells it (91900 = 9.19.0, what
  // the cu130 wheel of PyTorch 2.11 ships); 0: none.
  int64_t cudnn_version = 0;
  int cuda_version = 13000;  // the CUDA PyTorch was built with (13.0)
};

// The GPU of a device preset (planner --device): its compute capability
// (DeviceSpec::sm_major, sm_minor), with PyTorch 2.11's cu130 wheel (cuDNN
// 9.19) where the preset's build ships cuDNN (a ROCm card: none, its flash
// kernel passing the same checks as CUDA's from sm80); "cpu" and unknown
// names are the CPU.
SdpaDevice SdpaDeviceFor(std::string_view device_name);

// The arguments of one scaled_dot_product_attention call, as the kernel
// selection sees them.
struct SdpaCall {
  int elem_bytes = 4;     // q, k, v: 4 fp32, 2 fp16/bf16, 8 fp64
  bool bfloat16 = false;  // a 2-byte dtype that is bf16 (else fp16)
  int64_t heads = 0;      // query heads
  int64_t kv_heads = 0;   // key/value heads as passed (after any repeat_kv)
  int64_t head_dim = 0;   // d of q, k and v
  int64_t seq_len = 0;    // of queries and keys (training: equal)
  double dropout = 0;     // dropout_p
  bool has_mask = false;  // an attn_mask is passed
  bool enable_gqa = false;
  bool requires_grad = true;
  bool deterministic = false;  // torch.use_deterministic_algorithms(True)
};

// The backend PyTorch 2.11 picks for `call` on `device` with every backend
// enabled (torch.backends.cuda.*_sdp_enabled defaults): the first of the
// priority order whose checks pass, math when none does.
SdpaBackend SelectSdpaBackend(const SdpaDevice& device, const SdpaCall& call);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_SDPA_BACKEND_H_
