// Tiny LoRA and QLoRA jobs of the runtime's encoders (bert MLM, the
// sentence-transformers pooling + mnrl model), for runtime tests.
#ifndef REMAT_TESTS_RUNTIME_ENCODER_LORA_TINY_H_
#define REMAT_TESTS_RUNTIME_ENCODER_LORA_TINY_H_

#include <string>
#include <utility>
#include <vector>

#include "lora_tiny.h"

namespace remat::testing {

// bert MLM and the sbert model (mean pooling, mnrl on triplets, an unused
// pooler) with LoRA on every linear, QLoRA on PEFT's q,v, and QLoRA with
// double_quant; a distilroberta-like CLS model with double-quantized QLoRA.
inline std::vector<std::pair<std::string, ModelConfig>> TinyEncoderLoraFamilies() {
  ModelConfig sbert_dq = WithLora(TinyBert(Head::kPooling), kLoraAllLinear, true);
  sbert_dq.double_quant = true;
  ModelConfig distil_dq = WithLora(TinyDistilCls(), kLoraQ | kLoraV | kLoraO, true);
  distil_dq.double_quant = true;
  return {{"bert_mlm_lora_all", WithLora(TinyBert(Head::kMlm), kLoraAllLinear, false)},
          {"bert_mlm_qlora_qv", WithLora(TinyBert(Head::kMlm), 0, true)},
          {"sbert_lora_all", WithLora(TinyBert(Head::kPooling), kLoraAllLinear, false)},
          {"sbert_qlora_all_double_quant", sbert_dq},
          {"distil_cls_qlora_double_quant", distil_dq}};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_ENCODER_LORA_TINY_H_
