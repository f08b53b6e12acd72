// The LM head and its cross-entropy over chunks of the tokens (fused linear
// cross-entropy, as Liger-Kernel's LigerFusedLinearCrossEntropyFunction;
// ModelConfig::loss_chunks): the (tokens x vocab) logits and their gradient
// never exist whole. Each chunk's logits are made, turned into their
// gradient in place, and multiplied into the gradients of the head's input
// and weight, all in the forward; the backward only scales them by the
// loss's gradient. The planner models the same steps (heads.cc,
// ChunkedLmLoss).
#ifndef REMAT_RUNTIME_SRC_CHUNKED_LOSS_H_
#define REMAT_RUNTIME_SRC_CHUNKED_LOSS_H_

#include <ATen/ATen.h>

#include <cstdint>

namespace remat::runtime {

// Mean cross-entropy of x (n x h) times weight^T (vocab x h) against
// `targets` (n, int64; -100 ignored, as F.cross_entropy), over `chunks`
// chunks of ceil(n / chunks) rows. The logits are computed in the matmul
// dtype (autocast's where it is on, else x's) and the loss and the logits'
// gradient in fp32. Through the forward: x and the weight cast to that
// dtype once, the gradient of x (kept until backward, which returns it
// scaled, a new tensor) and, if the weight requires grad, its gradient
// (handed over as the weight's gradient in backward, scaled in place), and
// one chunk's logits, their fp32 copy (in which the gradient is made) and
// its cast back. `softcap` > 0 (ModelConfig::logit_softcap, Gemma 2's
// final_logit_softcapping): the loss of softcap * tanh(logits / softcap);
// a chunk's fp32 logits become t = tanh(logits / softcap) in place, the
// capped logits are a new fp32 chunk beside t (the gradient made in them),
// and that gradient is multiplied by 1 - t^2 (made in t). Returns a 0-dim
// fp32 tensor whose backward gives x and the weight their gradients.
at::Tensor ChunkedLmLoss(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets,
                         int64_t chunks, double softcap = 0);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_CHUNKED_LOSS_H_
