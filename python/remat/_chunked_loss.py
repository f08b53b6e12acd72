"""The chunked (fused linear) cross-entropy a plan with `loss_chunks` N
assumes (docs/chunked-loss.md): the head's matmul and the cross-entropy over
N chunks of the tokens, the gradients made in the forward, as remat's
runtime (runtime/src/chunked_loss.cc) and Liger-Kernel's
LigerFusedLinearCrossEntropyFunction compute it.

    loss = linear_cross_entropy(x, weight, targets, chunks, denominator, softcap=c)

x is (tokens, hidden), weight (vocab, hidden), targets (tokens,) with
ignore_index for tokens without a target. With grad, the forward holds the
weight's gradient (vocab x hidden, zeros at first) and the input's
(tokens x hidden), and one chunk at a time: its logits (m x vocab, m =
ceil(tokens / chunks) rows), a 32-bit copy where the logits are 16-bit, in
which softmax - one_hot is made in place and scaled by 1 / denominator, and
that gradient cast back to the matmul dtype where it differs; each chunk's
gradient is multiplied into the input's and the weight's gradients. The
backward only scales them by the loss's gradient. No tokens x vocab tensor
exists. Without grad (or where neither input needs one) only the loss is
computed, chunk by chunk.

With `softcap` c (Gemma 2's final_logit_softcapping) the loss is taken over
c * tanh(logits / c), as transformers' Gemma2ForCausalLM computes it: a
chunk's 32-bit logits become t = tanh(logits / c) in place, the capped
logits c * t are a new chunk beside it (in which softmax - one_hot is made
in place), and their gradient is multiplied by d(c * t)/d(logits) =
1 - t^2, made in place in t: two 32-bit chunks at once, nothing of
tokens x vocab.

The loss is the sum over the tokens with a target of logsumexp(logits) -
logits[target], over `denominator` (the number of tokens with a target when
None): transformers' causal-LM loss (its `mean`, or its `sum` over
`num_items_in_batch`). 16-bit logits are upcast to fp32 for the loss, as
transformers does; fp32 and fp64 logits stay as they are (a float64
reference test compares in float64).
"""

_FUNCTION = []


def _matmul_dtype(x):
    import torch

    device = x.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return x.dtype


def _loss_dtype(dtype):
    import torch

    return torch.promote_types(dtype, torch.float32)


def _chunks(n, chunks):
    rows = max(1, -(-n // max(1, int(chunks))))
    return [(start, min(rows, n - start)) for start in range(0, n, rows)]


def _function():
    """The autograd Function, made once (torch is imported on first use)."""
    if _FUNCTION:
        return _FUNCTION[0]
    import torch

    class LinearCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, targets, chunks, denominator, ignore_index, softcap):
            cdt = _matmul_dtype(x)
            with torch.autocast(x.device.type, enabled=False):
                w, xc = weight.to(cdt), x.to(cdt)  # no copy where already cdt
                grad_w = torch.zeros_like(weight) if weight.requires_grad else None
                grad_x = torch.empty_like(x)
                valid = targets.ne(ignore_index)
                count = denominator if denominator is not None else valid.sum().clamp_min(1)
                scale = 1.0 / float(count)
                loss = torch.zeros((), dtype=_loss_dtype(x.dtype), device=x.device)
                for start, m in _chunks(x.shape[0], chunks):
                    xi = xc.narrow(0, start, m)
                    index = targets.narrow(0, start, m).clamp_min(0).unsqueeze(1)
                    keep = valid.narrow(0, start, m).unsqueeze(1).to(loss.dtype)
                    g = torch.mm(xi, w.t())  # the chunk's logits
                    if g.dtype != loss.dtype:
                        g = g.to(loss.dtype)
                    t = None
                    if softcap:  # t = tanh(logits / c) in place; c * t a new chunk
                        t = g.div_(softcap).tanh_()
                        g = t * softcap
                    # loss = log(sum(exp(l - max))) + max - l[target]; the
                    # gradient softmax - one_hot made in place in the logits.
                    picked = g.gather(1, index)
                    top = g.amax(1, keepdim=True)
                    g.sub_(top).exp_()
                    total = g.sum(1, keepdim=True)
                    loss.add_(((total.log() + top - picked) * keep).sum())
                    g.div_(total)
                    g.scatter_add_(1, index, torch.full((m, 1), -1.0, dtype=g.dtype,
                                                        device=g.device))
                    g.mul_(keep * scale)
                    if t is not None:  # times 1 - t^2, made in t
                        g.mul_(t.mul_(t).neg_().add_(1.0))
                        t = None
                    gc = g if g.dtype == cdt else g.to(cdt)
                    del g
                    rows = grad_x.narrow(0, start, m)
                    if grad_x.dtype == cdt:
                        torch.mm(gc, w, out=rows)
                    else:
                        rows.copy_(torch.mm(gc, w))
                    if grad_w is not None:
                        if grad_w.dtype == cdt:
                            grad_w.addmm_(gc.t(), xi)
                        else:
                            grad_w.add_(torch.mm(gc.t(), xi))
                    del gc
            ctx.grad_x, ctx.grad_w = grad_x, grad_w
            return loss.mul_(scale)

        @staticmethod
        def backward(ctx, dy):
            # x's gradient: a new tensor while the kept one lives; the
            # weight's: the buffer itself, scaled in place, let go by ctx.
            dx = ctx.grad_x * dy.to(ctx.grad_x.dtype)
            ctx.grad_x = None
            dw, ctx.grad_w = ctx.grad_w, None
            if dw is not None:
                dw.mul_(dy.to(dw.dtype))
            return dx, dw, None, None, None, None, None

    _FUNCTION.append(LinearCrossEntropy)
    return LinearCrossEntropy


def _loss_only(x, weight, targets, chunks, denominator, ignore_index, softcap):
    import torch

    cdt = _matmul_dtype(x)
    with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
        w, xc = weight.to(cdt), x.to(cdt)
        valid = targets.ne(ignore_index)
        count = denominator if denominator is not None else valid.sum().clamp_min(1)
        loss = torch.zeros((), dtype=_loss_dtype(x.dtype), device=x.device)
        for start, m in _chunks(x.shape[0], chunks):
            g = torch.mm(xc.narrow(0, start, m), w.t()).to(loss.dtype)
            if softcap:
                g.div_(softcap).tanh_().mul_(softcap)
            index = targets.narrow(0, start, m).clamp_min(0).unsqueeze(1)
            rows = g.logsumexp(1, keepdim=True) - g.gather(1, index)
            loss.add_((rows * valid.narrow(0, start, m).unsqueeze(1)).sum())
        return loss / float(count)


def linear_cross_entropy(x, weight, targets, chunks, denominator=None, ignore_index=-100,
                         softcap=None):
    """The mean cross-entropy of x @ weight.T (soft-capped: softcap *
    tanh(x @ weight.T / softcap)) against targets over `chunks` chunks of x's
    rows (module docstring). x: (tokens, hidden); weight: (vocab, hidden);
    targets: (tokens,) int64; denominator: what the summed loss is divided
    by (a number or a one-element tensor; None: the tokens whose target is
    not ignore_index, at least 1); softcap: a positive number, or None or 0
    for none. Returns a 0-dim tensor (fp32 for 16-bit and fp32 inputs, fp64
    for fp64)."""
    import torch

    if torch.is_tensor(denominator):
        denominator = denominator.item()
    softcap = float(softcap) if softcap else None
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _function().apply(x, weight, targets, int(chunks), denominator, ignore_index,
                                 softcap)
    return _loss_only(x, weight, targets, chunks, denominator, ignore_index, softcap)
