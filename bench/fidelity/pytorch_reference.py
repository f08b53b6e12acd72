#!/usr/bin/env python3
"""PyTorch's own answers on the model remat's runtime trains, metered by
remat's CPU allocator meter (python/remat_measure), so both count the same
bytes.

Same shapes and the same ops as runtime/src/gpt_model.cc (pre-LN GPT,
F.dropout, baddbmm with a causal bias, tied head, log_softmax + nll),
the same synthetic batch layout, torch.optim.AdamW. F.dropout is at::dropout,
the runtime's and nn.Dropout's: on CPU it multiplies by a mask of the
input's dtype and keeps that (4 bytes an element in fp32); on CUDA it is
the fused native_dropout, which keeps a bool mask. --dropout native calls
torch.native_dropout on CPU too (a 1-byte mask). Modes:

  checkpoint  the plan's checkpoints applied the way PyTorch users do: each
              segment of checkpointed blocks wrapped in
              torch.utils.checkpoint.checkpoint(use_reentrant=False), a
              selective block's attention core wrapped alone; with the
              `none` plan this is plain eager PyTorch.
  sac         as checkpoint, but each selective block wrapped whole with a
              selective-checkpoint policy (create_selective_checkpoint_contexts):
              the attention core's ops (baddbmm, softmax, dropout, bmm)
              recomputed, every other op's output saved.
  compile     forward and loss through torch.compile (inductor, CPU) with
              torch._functorch.config.activation_memory_budget = --budget;
              the plan is not used. The first step compiles: its time is
              reported as compile_s, not as a step.

Prints one JSON line: step_ms (median of steps 2..), peak_bytes (the
highest absolute bytes in use in steps 2.., model state included), steps.

Usage: pytorch_reference.py --model M.json [--plan plan.json] [--mode checkpoint|sac|compile]
         [--budget B] [--meter lib.so | --build DIR] [--steps N] [--clock wall|thread]
"""
import argparse
import functools
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import remat_measure  # noqa: E402


def build_model(cfg, torch):
    """The weights, in gpt_model.cc's shapes; returns (params dict, blocks)."""
    L, h, V = cfg["layers"], cfg["hidden"], cfg["vocab"]
    f, s = cfg.get("ffn_hidden", 4 * h), cfg["seq_len"]
    torch.manual_seed(0)

    def normal(*shape):
        return (torch.randn(*shape) * 0.02).requires_grad_()

    def const(n, v):
        return torch.full((n,), float(v)).requires_grad_()

    top = dict(wte=normal(V, h), wpe=normal(cfg.get("max_position", s) or s, h),
               lnf_w=const(h, 1), lnf_b=const(h, 0))
    blocks = [dict(ln1_w=const(h, 1), ln1_b=const(h, 0), qkv_w=normal(3 * h, h),
                   qkv_b=const(3 * h, 0), proj_w=normal(h, h), proj_b=const(h, 0),
                   ln2_w=const(h, 1), ln2_b=const(h, 0), fc1_w=normal(f, h), fc1_b=const(f, 0),
                   fc2_w=normal(h, f), fc2_b=const(h, 0)) for _ in range(L)]
    return top, blocks


def make_forward(cfg, decisions, mode, top, blocks, torch, dropout_op="functional"):
    """forward(batch) -> loss, with the mode's checkpointing; dropout_op
    "functional" (F.dropout) or "native" (torch.native_dropout)."""
    import torch.utils.checkpoint as checkpoint
    F = torch.nn.functional
    L, h, a, V = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["vocab"]
    s, b, p = cfg["seq_len"], cfg.get("micro_batch", 1), cfg.get("dropout", 0.1)
    d = h // a
    causal = torch.full((s, s), -math.inf).triu_(1)
    aten = torch.ops.aten
    # The core's ops; F.dropout on CPU is empty_like, bernoulli_, div_ and
    # mul (the core's only mul).
    core_ops = {aten.baddbmm.default, aten._softmax.default, aten.native_dropout.default,
                aten.empty_like.default, aten.bernoulli_.float, aten.div_.Scalar,
                aten.mul.Tensor, aten.bmm.default}
    in_core = [False]  # set while core() runs: its dropout is the one to recompute

    def policy(ctx, op, *args, **kwargs):
        if in_core[0] and op in core_ops:
            return checkpoint.CheckpointPolicy.PREFER_RECOMPUTE
        return checkpoint.CheckpointPolicy.MUST_SAVE

    # F.dropout's mask is drawn in place into empty_like's output: the saved
    # entry is that mask once drawn (the recompute reads it, not a copy).
    sac_context = functools.partial(checkpoint.create_selective_checkpoint_contexts, policy,
                                    allow_cache_entry_mutation=True)

    def dropout(x):
        if p <= 0:
            return x
        return torch.native_dropout(x, p, True)[0] if dropout_op == "native" else F.dropout(x, p)

    def prologue(blk, x):
        t = F.layer_norm(x, (h,), blk["ln1_w"], blk["ln1_b"], 1e-5)
        t = F.linear(t, blk["qkv_w"], blk["qkv_b"])
        return t.view(b, s, 3, a, d).permute(2, 0, 3, 1, 4).reshape(3, b * a, s, d)

    def core(heads):
        in_core[0] = True
        probs = torch.softmax(torch.baddbmm(causal, heads[0], heads[1].transpose(1, 2),
                                            beta=1.0, alpha=1.0 / math.sqrt(d)), -1)
        ctx = torch.bmm(dropout(probs), heads[2])
        in_core[0] = False
        return ctx.view(b, a, s, d).permute(0, 2, 1, 3).reshape(b, s, h)

    def epilogue(blk, x, ctx):
        mid = x + dropout(F.linear(ctx, blk["proj_w"], blk["proj_b"]))
        t = F.layer_norm(mid, (h,), blk["ln2_w"], blk["ln2_b"], 1e-5)
        t = F.gelu(F.linear(t, blk["fc1_w"], blk["fc1_b"]))
        return mid + dropout(F.linear(t, blk["fc2_w"], blk["fc2_b"]))

    def plain_block(i, x):
        return epilogue(blocks[i], x, core(prologue(blocks[i], x)))

    def block(i, x, selective=False):
        if selective and mode == "sac":
            return checkpoint.checkpoint(plain_block, i, x, use_reentrant=False,
                                         context_fn=sac_context)
        if selective:
            heads = prologue(blocks[i], x)
            ctx = checkpoint.checkpoint(core, heads, use_reentrant=False)
            return epilogue(blocks[i], x, ctx)
        return plain_block(i, x)

    def segment(first, last):
        def run(x):
            for i in range(first, last + 1):
                x = plain_block(i, x)
            return x
        return run

    def forward(batch):
        x = dropout(F.embedding(batch[0], top["wte"]) + top["wpe"][:s])
        i = 0
        while i < L:  # chain layer i + 1 is block i
            dec = decisions[i + 1] if decisions else "keep"
            if dec == "checkpoint":
                j = i
                while j + 1 < L and decisions[j + 2] == "recompute":
                    j += 1
                x = checkpoint.checkpoint(segment(i, j), x, use_reentrant=False)
                i = j + 1
            else:
                x = block(i, x, selective=(dec == "selective"))
                i += 1
        x = F.layer_norm(x, (h,), top["lnf_w"], top["lnf_b"], 1e-5)
        logits = F.linear(x, top["wte"])
        return F.nll_loss(torch.log_softmax(logits.view(b * s, V), -1), batch[1].reshape(b * s))

    return forward


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--plan")
    ap.add_argument("--mode", choices=["checkpoint", "sac", "compile"], default="checkpoint")
    ap.add_argument("--budget", type=float, default=1.0,
                    help="compile: torch._functorch.config.activation_memory_budget")
    ap.add_argument("--dropout", choices=["functional", "native"], default="functional",
                    help="F.dropout (at::dropout, as the runtime and nn.Dropout) or "
                         "torch.native_dropout")
    ap.add_argument("--meter", help="libremat_cpu_meter.so (default: $REMAT_METER_LIB)")
    ap.add_argument("--build", help="a remat build dir holding lib/libremat_cpu_meter.so")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall")
    args = ap.parse_args()
    if args.mode != "compile" and not args.plan:
        ap.error(f"--mode {args.mode} needs --plan")

    try:
        meter = remat_measure.load(path=args.meter, build_dir=args.build)  # before any tensor
    except remat_measure.MeterError as e:
        print(e, file=sys.stderr)
        return 2
    import torch

    cfg = json.load(open(args.model))
    decisions = [l["decision"] for l in json.load(open(args.plan))["layers"]] if args.plan else None
    s, b, V = cfg["seq_len"], cfg.get("micro_batch", 1), cfg["vocab"]
    top, blocks = build_model(cfg, torch)
    params = list(top.values()) + [t for blk in blocks for t in blk.values()]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    forward = make_forward(cfg, decisions if args.mode != "compile" else None, args.mode, top,
                           blocks, torch, args.dropout)
    if args.mode == "compile":
        torch._functorch.config.activation_memory_budget = args.budget
        forward = torch.compile(forward)

    def step(batch):
        loss = forward(batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()

    gen = torch.Generator().manual_seed(1)
    steps, compile_s = [], None
    for k in range(args.steps + (1 if args.mode == "compile" else 0)):
        start = torch.randint(0, V, (b, 1), generator=gen)
        stride = torch.randint(1, 8, (b, 1), generator=gen)
        seq = (start + torch.arange(s + 1).unsqueeze(0) * stride) % V
        batch = torch.stack([seq[:, :-1], seq[:, 1:]]).contiguous()
        del start, stride, seq
        m = remat_measure.measure(step, batch, timeline=False, meter=meter)
        del batch
        if args.mode == "compile" and compile_s is None:
            compile_s = m.wall_s  # the compiling step: not a step time
            continue
        ms = (m.thread_s if args.clock == "thread" else m.wall_s) * 1e3
        steps.append({"step": len(steps) + 1, "loss": m.value, "step_ms": ms,
                      "peak_bytes": m.baseline_bytes + m.peak_bytes})
    later = steps[1:] or steps
    out = {"mode": args.mode, "step_ms": statistics.median(x["step_ms"] for x in later),
           "peak_bytes": max(x["peak_bytes"] for x in later), "steps": steps,
           "pytorch": torch.__version__}
    if args.mode == "compile":
        out.update(budget=args.budget, compile_s=compile_s)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
