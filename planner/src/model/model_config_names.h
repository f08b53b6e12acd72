// The names of model.json's enum values, in enum order: the tables that
// ToString, the Parse* functions, the parser and the serializer share.
// Internal to the planner.
#ifndef REMAT_SRC_MODEL_MODEL_CONFIG_NAMES_H_
#define REMAT_SRC_MODEL_MODEL_CONFIG_NAMES_H_

#include <string>
#include <vector>

namespace remat::internal {

// Indexed by enum value. In the tables that start with "default" (grad
// dtypes, gradients, heads, losses) that name is never accepted in a file.
extern const std::vector<std::string> kArchitectures;
extern const std::vector<std::string> kPrecisions;
extern const std::vector<std::string> kGradDtypes;
extern const std::vector<std::string> kGradients;
extern const std::vector<std::string> kOptimizers;
extern const std::vector<std::string> kAttention;
extern const std::vector<std::string> kLrSchedules;
extern const std::vector<std::string> kHeads;
extern const std::vector<std::string> kPoolings;
extern const std::vector<std::string> kLosses;
extern const std::vector<std::string> kActivations;
// model.json "layer_types": [0] a full-attention block, [1] a sliding one.
extern const std::vector<std::string> kLayerTypes;

// `names` without its first entry ("default"): the names a file may give.
std::vector<std::string> Accepted(const std::vector<std::string>& names);

// The enum value named `value` (its index in `names`); the first value when
// no name matches (callers pass a value the reader already accepted).
template <typename E>
E FromName(const std::vector<std::string>& names, const std::string& value) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == value) return static_cast<E>(i);
  }
  return static_cast<E>(0);
}

}  // namespace remat::internal

#endif  // REMAT_SRC_MODEL_MODEL_CONFIG_NAMES_H_
