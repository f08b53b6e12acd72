#include "variant_blocks.h"

#include <limits>
#include <optional>

#include "chain_model.h"

namespace remat::runtime {

at::Tensor SoftCap(const at::Tensor& x, double cap) {
  if (cap <= 0) return x;
  at::Tensor t = x / cap;
  t = at::tanh(t);
  return t * cap;
}

at::Tensor SlidingBias(int64_t s, int64_t window, const at::TensorOptions& options) {
  const auto longs = at::TensorOptions().dtype(at::kLong).device(options.device());
  const at::Tensor keys = at::arange(s, longs), queries = at::arange(s, longs).unsqueeze(1);
  const at::Tensor hidden = (keys > queries).logical_or_(keys <= queries - window);
  return at::zeros({s, s}, options).masked_fill_(hidden, -std::numeric_limits<double>::infinity());
}

at::Tensor RepeatKv(const at::Tensor& t, int64_t a) {
  const int64_t b = t.size(0), kv = t.size(1), s = t.size(2), d = t.size(3);
  if (kv == a) return t;
  return t.unsqueeze(2).expand({b, kv, a / kv, s, d}).reshape({b, a, s, d});
}

at::Tensor WindowedSdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const AttentionOptions& options) {
  const int64_t b = q.size(0), a = q.size(1), s = q.size(2);
  const auto bools = at::TensorOptions().dtype(at::kBool).device(q.device());
  const at::Tensor keys = at::arange(s, bools.dtype(at::kLong));
  const at::Tensor queries = keys.unsqueeze(1);
  // transformers' sliding_window_causal: kv_idx <= q_idx and kv_idx > q_idx - window.
  const at::Tensor allowed =
      (keys <= queries).logical_and_(keys > queries - options.window).expand({b, 1, s, s});
  if (options.dropout > 0) SeedGenerator(q.device(), options.seed);
  return at::scaled_dot_product_attention(q, RepeatKv(k, a), RepeatKv(v, a), allowed,
                                          options.dropout, /*is_causal=*/false,
                                          /*scale=*/std::nullopt, /*enable_gqa=*/false);
}

}  // namespace remat::runtime
