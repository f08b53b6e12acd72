// LoRA adapters and QLoRA's nf4 weights on LibTorch: the pieces the models
// (gpt_model.cc, llama_model.cc, encoder_model.cc) build their projections
// from.
//
// nf4 (QLoRA, Dettmers et al. 2023; bitsandbytes' quantize_4bit): the weight,
// flattened, in blocks of 64; each block scaled by its absmax to [-1, 1] and
// every value replaced by the index of the nearest of the 16 NormalFloat
// levels; two indices a byte (the first in the high nibble), an fp32 absmax a
// block. Dequantizing multiplies the level by its block's absmax.
//
// double_quant (bitsandbytes' compress_statistics, QLoRA's nested
// quantization): the fp32 absmax constants, less their mean (one fp32
// offset), in blocks of 256, each block scaled by its absmax and every value
// replaced by the index of the nearest of bitsandbytes' 256 signed dynamic
// 8-bit levels; one fp32 absmax per 256 blocks. An absmax is dequantized as
// level * its block's constant + offset, chunk by chunk with the weight.
//
// PEFT's LoRA linear: y = x W^T (+ b) + B(A(dropout(x))) * alpha / r, W frozen,
// A (r x in) kaiming-uniform(a = sqrt(5)) as nn.Linear, B (out x r) zeros.
#ifndef REMAT_RUNTIME_SRC_LORA_H_
#define REMAT_RUNTIME_SRC_LORA_H_

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <vector>

namespace remat::runtime {

// The 16 NormalFloat levels of the QLoRA paper (bitsandbytes' NF4 table).
const std::array<float, 16>& Nf4Levels();

// A weight in nf4: `packed` uint8 (ceil(n/2) bytes), `absmax` fp32 (one per
// block of 64) or, double-quantized, uint8 indices into Dynamic8BitLevels(),
// `code` the 16 levels in fp32 (bitsandbytes' QuantState keeps its code table
// per weight), the original shape; with double_quant `nested_absmax` (fp32,
// one per kNf4NestedBlocks absmax) and `offset` (fp32, one element), else
// both undefined.
struct Nf4Weight {
  at::Tensor packed;
  at::Tensor absmax;
  at::Tensor code;
  std::vector<int64_t> shape;
  at::Tensor nested_absmax;
  at::Tensor offset;
};

// bitsandbytes' create_dynamic_map(signed=True): the 256 levels of the
// 8-bit code that double_quant stores absmax constants in (shared by every
// weight, as bitsandbytes' is), ascending, in [-1, 1].
const std::array<float, 256>& Dynamic8BitLevels();

// Quantizes `w` (any float dtype, any device); blocks of `block` elements.
// `double_quant`: the absmax constants in 8 bits (absmax uint8, one a block;
// nested_absmax fp32, one per kNf4NestedBlocks blocks; offset fp32, one).
Nf4Weight QuantizeNf4(const at::Tensor& w, int64_t block = 64, bool double_quant = false);

// Blocks of the fp32 absmax per nested constant (bitsandbytes' 256).
inline constexpr int64_t kNf4NestedBlocks = 256;

// The bytes `q` holds: packed, absmax, code, nested_absmax and offset
// (the planner's Nf4Bytes; the shared 8-bit code table is not counted).
int64_t Nf4StoredBytes(const Nf4Weight& q);

// The weight back in `dtype`, on the packed tensor's device: a fresh tensor
// (QLoRA dequantizes per call, in forward and again in backward).
at::Tensor DequantizeNf4(const Nf4Weight& q, at::ScalarType dtype);

// One adapter of rank r on a linear of `in` -> `out` features.
struct LoraAdapter {
  at::Tensor a;      // (r, in), requires grad
  at::Tensor b;      // (out, r), requires grad
  double scale = 1;  // alpha / r
};

// PEFT's initialization: A as nn.Linear's default (kaiming-uniform with
// a = sqrt(5): uniform(-1/sqrt(in), 1/sqrt(in))), B zeros; `gen` (a CPU
// generator) draws A in fp32 on the CPU, then it moves to `options`.
LoraAdapter MakeLoraAdapter(int64_t in, int64_t out, int64_t rank, double alpha,
                            const at::TensorOptions& options, at::Generator gen);

// x W^T + bias + B(A(dropout(x))) * scale, as PEFT's lora.Linear.forward:
// the base output first, then the adapter's on dropout(x) (p = 0: x itself),
// scaled and added. `weight` and `bias` are frozen (no grad).
at::Tensor LoraLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const LoraAdapter& adapter, double dropout, bool train);

// x W^T + bias with W in nf4, as bitsandbytes' MatMul4Bit: W dequantized
// in x's dtype for the forward and again in backward for x's gradient;
// autograd keeps nothing but references to the packed weight. W and the bias
// are frozen.
at::Tensor Nf4Linear(const at::Tensor& x, const Nf4Weight& w, const at::Tensor& bias);

// One projection of a block: the base (a dense weight, trained without LoRA
// and frozen with it, or QLoRA's packed nf4 one), its bias (undefined: none),
// and its adapter when LoRA targets it (adapter.a undefined: none).
struct Projection {
  at::Tensor weight;  // undefined when nf4.packed is defined
  Nf4Weight nf4;
  at::Tensor bias;
  LoraAdapter adapter;
};

// The projection of `x`: the base alone, or PEFT's lora.Linear.forward with
// the adapter's input dropped at `dropout` and, in an adapter dtype other than
// x's (without autocast), x cast to it and the sum cast back to the base
// output's dtype. Under autocast the matmuls run in its dtype (an nf4 weight
// is dequantized in it).
at::Tensor ProjectionForward(const at::Tensor& x, const Projection& p, double dropout);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_LORA_H_
