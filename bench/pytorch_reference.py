#!/usr/bin/env python3
"""PyTorch's own torch.utils.checkpoint on the model remat's runtime trains.

Same shapes and the same ops as runtime/src/gpt_model.cc (pre-LN GPT,
native_dropout, baddbmm with a causal bias, tied head, log_softmax + nll),
the same synthetic batch layout, torch.optim.AdamW, and the plan's
checkpoints applied the way PyTorch users do: each segment of checkpointed
blocks wrapped in torch.utils.checkpoint.checkpoint (a selective block wraps
its attention core; use_reentrant=True, the default of the PyTorch versions
compared so far, which 2.x asks to be named). Memory is metered by remat's
CPU allocator (libremat_cpu_meter.so, loaded with ctypes into this process's
LibTorch), so both sides count the same bytes. Prints one JSON line.

Usage: pytorch_reference.py --model M.json --plan plan.json --meter lib.so
                            [--steps N] [--clock wall|thread]
"""
import argparse
import ctypes
import json
import math
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--meter", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall")
    args = ap.parse_args()

    meter = ctypes.CDLL(args.meter)
    meter.remat_meter_current_bytes.restype = ctypes.c_longlong
    meter.remat_meter_peak_bytes.restype = ctypes.c_longlong
    import torch  # after the meter library: its allocator is registered on install
    import torch.utils.checkpoint as checkpoint
    if meter.remat_meter_install() != 1:
        raise SystemExit("the remat CPU meter could not be registered")

    cfg = json.load(open(args.model))
    plan = json.load(open(args.plan))
    decisions = [l["decision"] for l in plan["layers"]]
    L, h, a = cfg["layers"], cfg["hidden"], cfg["heads"]
    f = cfg.get("ffn_hidden", 4 * h)
    V, s, b = cfg["vocab"], cfg["seq_len"], cfg.get("micro_batch", 1)
    p = cfg.get("dropout", 0.1)
    d = h // a
    torch.manual_seed(0)

    def normal(*shape):
        return (torch.randn(*shape) * 0.02).requires_grad_()

    def const(n, v):
        return torch.full((n,), float(v)).requires_grad_()

    wte, wpe = normal(V, h), normal(cfg.get("max_position", s) or s, h)
    blocks = [dict(ln1_w=const(h, 1), ln1_b=const(h, 0), qkv_w=normal(3 * h, h),
                   qkv_b=const(3 * h, 0), proj_w=normal(h, h), proj_b=const(h, 0),
                   ln2_w=const(h, 1), ln2_b=const(h, 0), fc1_w=normal(f, h), fc1_b=const(f, 0),
                   fc2_w=normal(h, f), fc2_b=const(h, 0)) for _ in range(L)]
    lnf_w, lnf_b = const(h, 1), const(h, 0)
    params = [wte, wpe, lnf_w, lnf_b] + [t for blk in blocks for t in blk.values()]
    causal = torch.full((s, s), -math.inf).triu_(1)
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)

    def dropout(x):
        return torch.native_dropout(x, p, True)[0] if p > 0 else x

    def prologue(blk, x):
        t = torch.nn.functional.layer_norm(x, (h,), blk["ln1_w"], blk["ln1_b"], 1e-5)
        t = torch.nn.functional.linear(t, blk["qkv_w"], blk["qkv_b"])
        return t.view(b, s, 3, a, d).permute(2, 0, 3, 1, 4).reshape(3, b * a, s, d)

    def core(heads):
        probs = torch.softmax(torch.baddbmm(causal, heads[0], heads[1].transpose(1, 2),
                                            beta=1.0, alpha=1.0 / math.sqrt(d)), -1)
        ctx = torch.bmm(dropout(probs), heads[2])
        return ctx.view(b, a, s, d).permute(0, 2, 1, 3).reshape(b, s, h)

    def epilogue(blk, x, ctx):
        mid = x + dropout(torch.nn.functional.linear(ctx, blk["proj_w"], blk["proj_b"]))
        t = torch.nn.functional.layer_norm(mid, (h,), blk["ln2_w"], blk["ln2_b"], 1e-5)
        t = torch.nn.functional.gelu(torch.nn.functional.linear(t, blk["fc1_w"], blk["fc1_b"]))
        return mid + dropout(torch.nn.functional.linear(t, blk["fc2_w"], blk["fc2_b"]))

    def block(i, x, selective=False):
        blk = blocks[i]
        heads = prologue(blk, x)
        ctx = checkpoint.checkpoint(core, heads, use_reentrant=True) if selective else core(heads)
        return epilogue(blk, x, ctx)

    def segment(first, last):
        def run(x):
            for i in range(first, last + 1):
                x = block(i, x)
            return x
        return run

    def step(batch):
        x = dropout(torch.nn.functional.embedding(batch[0], wte) + wpe[:s])
        i = 0
        while i < L:  # chain layer i + 1 is block i
            dec = decisions[i + 1]
            if dec == "checkpoint":
                j = i
                while j + 1 < L and decisions[j + 2] == "recompute":
                    j += 1
                x = checkpoint.checkpoint(segment(i, j), x, use_reentrant=True)
                i = j + 1
            else:
                x = block(i, x, selective=(dec == "selective"))
                i += 1
        x = torch.nn.functional.layer_norm(x, (h,), lnf_w, lnf_b, 1e-5)
        logits = torch.nn.functional.linear(x, wte)
        loss = torch.nn.functional.nll_loss(torch.log_softmax(logits.view(b * s, V), -1),
                                            batch[1].reshape(b * s))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()

    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    gen = torch.Generator().manual_seed(1)
    steps = []
    for k in range(args.steps):
        start = torch.randint(0, V, (b, 1), generator=gen)
        stride = torch.randint(1, 8, (b, 1), generator=gen)
        t = torch.arange(s + 1).unsqueeze(0)
        seq = (start + t * stride) % V
        batch = torch.stack([seq[:, :-1], seq[:, 1:]]).contiguous()
        meter.remat_meter_reset_peak()
        t0 = clock()
        loss = step(batch)
        ms = (clock() - t0) * 1e3
        del batch
        steps.append({"step": k + 1, "loss": loss, "step_ms": ms,
                      "peak_bytes": meter.remat_meter_peak_bytes()})
    later = steps[1:] or steps
    print(json.dumps({"step_ms": statistics.median(x["step_ms"] for x in later),
                      "peak_bytes": max(x["peak_bytes"] for x in later),
                      "steps": steps}))


if __name__ == "__main__":
    main()
