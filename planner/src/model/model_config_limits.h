// The ranges model.json's sizes are checked against, shared by the parser
// and the validation. Internal to the planner.
#ifndef REMAT_SRC_MODEL_MODEL_CONFIG_LIMITS_H_
#define REMAT_SRC_MODEL_MODEL_CONFIG_LIMITS_H_

#include <cstdint>

namespace remat::internal {

// Generous limits: anything above is a typo, and keeps byte arithmetic far
// from overflow (see checked_math.h for the rest). Published models have up
// to ~200 blocks; the strategies' budget searches grow with the square of the
// chain (4096 blocks plan in about 25 s, 65536 would take hours).
inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxWidth = 1 << 20;   // hidden, heads, head_dim, experts
inline constexpr int64_t kMaxTokens = 1 << 24;  // vocab, seq_len, micro_batch, ...
inline constexpr int64_t kMaxTexts = 1024;      // texts_per_example

}  // namespace remat::internal

#endif  // REMAT_SRC_MODEL_MODEL_CONFIG_LIMITS_H_
