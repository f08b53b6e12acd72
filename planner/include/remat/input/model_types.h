// Which config.json model_types the planner has a hand-written model for;
// the others are planned from a trace (docs/trace.md).
#ifndef REMAT_INPUT_MODEL_TYPES_H_
#define REMAT_INPUT_MODEL_TYPES_H_

#include <string>

namespace remat {

// Whether ParseHfConfig reads a config.json of `model_type` (gpt2, the
// llama family and its variants, the BERT encoders).
bool IsHandWrittenModelType(const std::string& model_type);

}  // namespace remat

#endif  // REMAT_INPUT_MODEL_TYPES_H_
