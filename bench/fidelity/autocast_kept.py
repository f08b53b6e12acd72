#!/usr/bin/env python3
"""What torch.autocast("cpu", dtype=torch.bfloat16) keeps for backward, op by
op, on bench/fidelity/models/cpu-amp-s.json's shape (b 4, s 128, h 128, 4 heads, ffn
512, vocab 2048): the saved tensors (torch.autograd.graph.saved_tensors_hooks:
shape, dtype, storage bytes) of F.linear and of the loss, and the bytes remat's
CPU meter counts around gpt_model.cc's block and the loss written in PyTorch.
docs/analytic-model.md, "Autocast on CPU", quotes its output.

usage: OPENBLAS_NUM_THREADS=1 bench/fidelity/autocast_kept.py [--build build]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import remat_measure  # noqa: E402

args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
args.add_argument("--build", default="build", help="a remat build with the runtime")
meter = remat_measure.load(build_dir=args.parse_args().build)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.manual_seed(0)
b, s, h, a, f, V = 4, 128, 128, 4, 512, 2048
d, n = h // a, b * s
print("torch", torch.__version__)


def saved_by(title, fn):
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fn()
    print(title)
    storages = {}
    for t in saved:
        st = t.untyped_storage()
        same = f" (the storage of #{storages[st.data_ptr()]})" if st.data_ptr() in storages else ""
        storages.setdefault(st.data_ptr(), len(storages))
        print(f"  saved {tuple(t.shape)} {t.dtype} strides {t.stride()}: "
              f"{st.nbytes()} bytes of storage{same}")


def leaf(*shape):
    return (torch.randn(*shape) * 0.02).requires_grad_()


x16 = torch.randn(n, h).to(torch.bfloat16).requires_grad_()
w, bias = leaf(3 * h, h), leaf(3 * h)
saved_by("F.linear(bf16 x, fp32 leaf weight 384 x 128, bias):", lambda: F.linear(x16, w, bias))
saved_by("the same linear twice in one region (autocast's weight cache):",
         lambda: F.linear(x16, w, bias) + F.linear(x16, w, bias))
frozen = w.detach()
saved_by("F.linear with a frozen weight:", lambda: F.linear(x16, frozen, bias))
logits = torch.randn(n, V).to(torch.bfloat16).requires_grad_()
target = torch.randint(0, V, (n,))
saved_by("F.cross_entropy(bf16 logits):", lambda: F.cross_entropy(logits, target))
saved_by("F.nll_loss(F.log_softmax(bf16 logits)):",
         lambda: F.nll_loss(F.log_softmax(logits, -1), target))

W = dict(ln1_w=torch.ones(h).requires_grad_(), ln1_b=torch.zeros(h).requires_grad_(),
         qkv=leaf(3 * h, h), qkv_b=leaf(3 * h), proj=leaf(h, h), proj_b=leaf(h),
         ln2_w=torch.ones(h).requires_grad_(), ln2_b=torch.zeros(h).requires_grad_(),
         fc1=leaf(f, h), fc1_b=leaf(f), fc2=leaf(h, f), fc2_b=leaf(h))
causal = torch.triu(torch.full((s, s), float("-inf")), 1)


def block(x):  # runtime/src/gpt_model.cc's block, eager attention, dropout 0.1
    t = F.linear(F.layer_norm(x, (h,), W["ln1_w"], W["ln1_b"], 1e-5), W["qkv"], W["qkv_b"])
    heads = t.view(b, s, 3, a, d).permute(2, 0, 3, 1, 4).reshape(3, b * a, s, d)
    p = torch.baddbmm(causal, heads[0], heads[1].transpose(1, 2), beta=1.0, alpha=d ** -0.5)
    p = F.dropout(torch.softmax(p, -1), 0.1, True)
    ctx = torch.bmm(p, heads[2]).view(b, a, s, d).transpose(1, 2).reshape(b, s, h)
    mid = x + F.dropout(F.linear(ctx, W["proj"], W["proj_b"]), 0.1, True)
    t = F.layer_norm(mid, (h,), W["ln2_w"], W["ln2_b"], 1e-5)
    t = F.linear(F.gelu(F.linear(t, W["fc1"], W["fc1_b"])), W["fc2"], W["fc2_b"])
    return mid + F.dropout(t, 0.1, True)


def metered(title, fn, x):
    meter.reset_peak()
    before = meter.current_bytes()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = fn(x)
    kept = meter.current_bytes() - before
    meter.reset_peak()
    start = meter.current_bytes()
    y.backward(torch.ones_like(y))
    print(f"{title}: {kept} bytes live after the forward (its output included), "
          f"backward peak {meter.peak_bytes() - start} above its start")


copies = 2 * sum(W[k].numel() for k in ("qkv", "proj", "fc1", "fc2"))
metered(f"block (bf16 weight copies {copies} bytes)", block, torch.randn(b, s, h).requires_grad_())
metered("F.cross_entropy(bf16 logits)", lambda l: F.cross_entropy(l, target), logits)
metered("F.nll_loss(F.log_softmax(bf16 logits))",
        lambda l: F.nll_loss(F.log_softmax(l, -1), target), logits)
