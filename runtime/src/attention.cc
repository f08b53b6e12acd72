#include "attention.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "chain_model.h"

namespace remat::runtime {

at::Tensor SdpaAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const AttentionOptions& options) {
  if (options.dropout > 0) SeedGenerator(q.device(), options.seed);
  // transformers' sdpa_attention_forward without padding: no mask, is_causal
  // for decoders, enable_gqa for grouped keys and values.
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/std::nullopt, options.dropout,
                                          options.causal, /*scale=*/std::nullopt,
                                          /*enable_gqa=*/k.size(1) != q.size(1));
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The sizes of one attention: q (b, a, s, d), k and v (b, kv, s, d), each
// key/value head shared by rep = a / kv query heads.
struct Sizes {
  int64_t b, a, kv, rep, s, d;
  double scale;
};

Sizes SizesOf(const at::Tensor& q, const at::Tensor& k) {
  const int64_t d = q.size(3);
  return {q.size(0),
          q.size(1),
          k.size(1),
          q.size(1) / k.size(1),
          q.size(2),
          d,
          1.0 / std::sqrt(static_cast<double>(d))};
}

// Rows [i0, i0 + n) of a (b, a, s, d) tensor as (b, kv, rep, n, d).
at::Tensor Rows(const at::Tensor& t, const Sizes& z, int64_t i0, int64_t n) {
  return t.reshape({z.b, z.kv, z.rep, z.s, z.d}).narrow(3, i0, n);
}

// The same rows grouped by key/value head, (b, kv, rep * n, d): one small
// copy, the left operand of a matmul against that head's keys or values.
at::Tensor GroupedRows(const at::Tensor& t, const Sizes& z, int64_t i0, int64_t n) {
  return Rows(t, z, i0, n).reshape({z.b, z.kv, z.rep * n, z.d});
}

// fp32 scores of query rows [i0, i0 + n) against every key, scaled and
// causally masked: (b, kv, rep, n, s).
// A window > 0 also masks the keys at or past `window` before each query.
at::Tensor Scores(const at::Tensor& q, const at::Tensor& k, const Sizes& z, bool causal,
                  int64_t window, int64_t i0, int64_t n) {
  at::Tensor scores = at::matmul(GroupedRows(q, z, i0, n), k.transpose(-2, -1)).to(at::kFloat);
  scores = scores.mul_(z.scale).view({z.b, z.kv, z.rep, n, z.s});
  if (causal) {
    const auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
    const at::Tensor keys = at::arange(z.s, opts), queries = at::arange(i0, i0 + n, opts).unsqueeze(1);
    at::Tensor hidden = keys > queries;
    if (window > 0) hidden = hidden.logical_or_(keys <= queries - window);
    scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
  }
  return scores;
}

// Block `block`'s dropout multiplier (0 or 1 / (1 - p)), fp32, drawn from a
// generator of the device's kind seeded with (seed, block): forward,
// backward and any recompute draw the same one.
at::Tensor DropoutScale(const at::Tensor& like, double p, uint64_t seed, int64_t block) {
  at::Generator gen;
  {
    at::Generator device_default = at::globalContext().defaultGenerator(like.device());
    std::lock_guard<std::mutex> lock(device_default.mutex());
    gen = device_default.clone();
  }
  gen.set_current_seed(seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(block + 1));
  return at::empty_like(like).bernoulli_(1 - p, gen).div_(1 - p);
}

class BlockwiseAttention : public torch::autograd::Function<BlockwiseAttention> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, bool causal, double dropout, int64_t seed,
                            int64_t window) {
    const Sizes z = SizesOf(q, k);
    // The output in (b, s, a, d) memory, so that merging heads is a view.
    at::Tensor out = at::empty({z.b, z.s, z.a, z.d}, q.options()).transpose(1, 2);
    at::Tensor lse = at::empty({z.b, z.a, z.s}, q.options().dtype(at::kFloat));
    const at::Tensor out5 = out.view({z.b, z.kv, z.rep, z.s, z.d});
    const at::Tensor lse4 = lse.view({z.b, z.kv, z.rep, z.s});
    for (int64_t i0 = 0, block = 0; i0 < z.s; i0 += kFlashBlockRows, ++block) {
      const int64_t n = std::min(kFlashBlockRows, z.s - i0);
      at::Tensor p = Scores(q, k, z, causal, window, i0, n);
      const at::Tensor row_lse = at::logsumexp(p, -1, /*keepdim=*/true);
      p.sub_(row_lse).exp_();
      if (dropout > 0) p.mul_(DropoutScale(p, dropout, static_cast<uint64_t>(seed), block));
      const at::Tensor context =
          at::matmul(p.view({z.b, z.kv, z.rep * n, z.s}).to(q.scalar_type()), v);
      out5.narrow(3, i0, n).copy_(context.view({z.b, z.kv, z.rep, n, z.d}));
      lse4.narrow(3, i0, n).copy_(row_lse.squeeze(-1));
    }
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["window"] = window;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3];
    const at::Tensor lse4 = saved[4].view({q.size(0), k.size(1), q.size(1) / k.size(1), -1});
    const bool causal = ctx->saved_data["causal"].toBool();
    const double dropout = ctx->saved_data["dropout"].toDouble();
    const uint64_t seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const int64_t window = ctx->saved_data["window"].toInt();
    const Sizes z = SizesOf(q, k);
    const at::ScalarType dtype = q.scalar_type();
    const at::Tensor& dout = grads[0];
    at::Tensor dq = at::empty({z.b, z.a, z.s, z.d}, q.options());
    const at::Tensor dq5 = dq.view({z.b, z.kv, z.rep, z.s, z.d});
    const auto fp32 = q.options().dtype(at::kFloat);
    at::Tensor dk = at::zeros({z.b, z.kv, z.s, z.d}, fp32), dv = at::zeros_like(dk);
    for (int64_t i0 = 0, block = 0; i0 < z.s; i0 += kFlashBlockRows, ++block) {
      const int64_t n = std::min(kFlashBlockRows, z.s - i0);
      const std::vector<int64_t> grouped = {z.b, z.kv, z.rep * n, z.s};
      at::Tensor p = Scores(q, k, z, causal, window, i0, n);
      p.sub_(lse4.narrow(3, i0, n).unsqueeze(-1)).exp_();
      at::Tensor scale;  // the dropout multiplier, undefined without dropout
      if (dropout > 0) scale = DropoutScale(p, dropout, seed, block);
      // Matmuls in q's dtype (accumulating in fp32), the softmax terms in fp32.
      const at::Tensor dout_rows = GroupedRows(dout, z, i0, n);
      // dV += P_dropped^T dO
      const at::Tensor dropped = scale.defined() ? p * scale : p;
      dv.add_(at::matmul(dropped.view(grouped).transpose(-2, -1).to(dtype), dout_rows));
      // dP = dO V^T (through the dropout); dS = P (dP - rowsum(dO * O)).
      at::Tensor dp = at::matmul(dout_rows, v.transpose(-2, -1))
                          .to(at::kFloat)
                          .view({z.b, z.kv, z.rep, n, z.s});
      if (scale.defined()) dp.mul_(scale);
      const at::Tensor row_dot =
          (dout_rows.to(at::kFloat) * GroupedRows(out, z, i0, n).to(at::kFloat))
              .sum(-1)
              .view({z.b, z.kv, z.rep, n, 1});
      const at::Tensor ds = dp.sub_(row_dot).mul_(p).mul_(z.scale).view(grouped).to(dtype);
      dq5.narrow(3, i0, n).copy_(at::matmul(ds, k).view({z.b, z.kv, z.rep, n, z.d}));
      dk.add_(at::matmul(ds.transpose(-2, -1), GroupedRows(q, z, i0, n)));
    }
    return {dq,           dk.to(k.scalar_type()), dv.to(v.scalar_type()),
            at::Tensor(), at::Tensor(),           at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor FlashAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const AttentionOptions& options) {
  return BlockwiseAttention::apply(q, k, v, options.causal, options.dropout,
                                   static_cast<int64_t>(options.seed), options.window);
}

}  // namespace remat::runtime
