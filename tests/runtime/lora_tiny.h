// Tiny LoRA and QLoRA jobs of the runtime's decoders, for runtime tests.
#ifndef REMAT_TESTS_RUNTIME_LORA_TINY_H_
#define REMAT_TESTS_RUNTIME_LORA_TINY_H_

#include <string>
#include <utility>
#include <vector>

#include "tiny_model.h"

namespace remat::testing {

// `c` with adapters of rank 4 (alpha 8) on `targets` (0: PEFT's q,v),
// lora_dropout 0.1, and its blocks' linears in nf4 when `nf4`.
inline ModelConfig WithLora(ModelConfig c, uint32_t targets, bool nf4) {
  c.lora_rank = 4;
  c.lora_alpha = 8;
  c.lora_targets = targets;
  c.lora_dropout = 0.1;
  if (nf4) c.quantization = Quantization::kNf4;
  return WithDefaults(c);
}

// gpt and llama (grouped-query; qwen2's biases) with LoRA and QLoRA.
inline std::vector<std::pair<std::string, ModelConfig>> TinyLoraFamilies() {
  return {{"gpt_lora_all", WithLora(TinyGpt(), kLoraAllLinear, false)},
          {"gpt_qlora_qv", WithLora(TinyGpt(), 0, true)},
          {"llama_lora_all", WithLora(TinyLlama(), kLoraAllLinear, false)},
          {"llama_qlora_all", WithLora(TinyLlama(), kLoraAllLinear, true)},
          {"qwen2_lora_qv", WithLora(TinyQwen2(), 0, false)},
          {"qwen2_qlora_v_o_down", WithLora(TinyQwen2(), kLoraV | kLoraO | kLoraDown, true)}};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_LORA_TINY_H_
