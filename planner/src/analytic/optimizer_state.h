// The optimizer state of the optimizers whose state is not a fixed number of
// bytes per parameter, counted tensor by tensor as each implementation
// allocates it on its first step. Internal to the planner.
//
// A moment's dtype is the precision's (precision.h: the parameter's, or
// fp32 beside master weights), a LoRA adapter's lora_dtype where it is set.
//  - adafactor (torch/optim/_adafactor.py, torch 2.11): per tensor a 0-dim
//    fp32 `step`; a tensor of 2 or more dimensions keeps `row_var` (its
//    shape with the last size 1) and `col_var` (with the one before it 1),
//    a vector keeps `variance` of its size. No first moment.
//  - muon (torch/optim/_muon.py): `momentum_buffer` of each 2-D tensor; the
//    others under torch.optim.AdamW: exp_avg, exp_avg_sq and a 0-dim fp32
//    `step` each.
//  - adamw8bit (bitsandbytes/optim/optimizer.py, Optimizer2State with
//    optim_bits 8): a tensor of at least 4,096 elements keeps state1 and
//    state2 in uint8 and absmax1 and absmax2 in fp32, one per block of 256
//    elements (the last block partial); a smaller one keeps state1 and
//    state2 in fp32 whatever its dtype. The two 256-entry fp32 quantization
//    maps (qmap1, qmap2) are shared by every tensor: 2 KiB once. Its `step`
//    is a Python int.
//  - paged_adamw8bit (bitsandbytes' PagedAdamW8bit, the same class with
//    is_paged): adamw8bit's tensors and bytes. On CUDA, get_state_buffer
//    puts state1 and state2 of a tensor of 100,000 elements or more in
//    managed memory (F.get_paged: cudaMallocManaged of exactly its bytes);
//    on the CPU it falls back to ordinary tensors.
//  - torchao_adamw8bit, torchao_adamw4bit, torchao_adamw_fp8 (torchao 0.18,
//    torchao/optim/adam.py _AdamBase._new_buffer and subclass_*.py): per
//    tensor a 0-dim fp32 `step`, and exp_avg and exp_avg_sq, each either a
//    tensor subclass or, for a tensor under 4,096 elements or not a whole
//    number of blocks, zeros_like(param) (the moment's dtype). The
//    subclasses hold, per moment:
//      8-bit (block 256): uint8 codes of every element, an fp32 scale per
//        block and its own 256-entry fp32 qmap;
//      4-bit (block 128): uint8 codes of two elements each, an fp32 scale
//        per block and its own 16-entry fp32 qmap;
//      fp8 (block 256): float8_e4m3fn codes, an fp32 scale per block.
// Master weights (mixed_*) come on top, as for every optimizer.
#ifndef REMAT_SRC_ANALYTIC_OPTIMIZER_STATE_H_
#define REMAT_SRC_ANALYTIC_OPTIMIZER_STATE_H_

#include <cstdint>
#include <vector>

#include "analytic/transformer_graph.h"
#include "remat/io/status.h"
#include "remat/model/model_config.h"

namespace remat::analytic {

inline constexpr int64_t kAdamW8bitBlock = 256;      // elements per absmax
inline constexpr int64_t kAdamW8bitMinSize = 4096;   // smaller tensors: fp32 state
inline constexpr int64_t kAdamW8bitQuantMaps = 2 * 256 * 4;
inline constexpr int64_t kTorchaoMinSize = 4096;  // smaller tensors: unquantized

// Whether `o` is one of bitsandbytes' 8-bit AdamWs (plain or paged).
bool BitsAndBytes8bit(Optimizer o);

// Whether `o` keeps state counted tensor by tensor (OptimizerStateBytes)
// rather than a fixed number of bytes per parameter.
bool StatePerTensor(Optimizer o);

// The bytes of a moment element of trained tensor `t` in job `c`.
int MomentBytes(const TrainedTensor& t, const ModelConfig& c);

// The optimizer state (master weights included) of the trained `tensors` of
// job `c` (defaults resolved) under a StatePerTensor optimizer. Fails on
// overflow.
Result<int64_t> OptimizerStateBytes(const std::vector<TrainedTensor>& tensors,
                                    const ModelConfig& c);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_OPTIMIZER_STATE_H_
