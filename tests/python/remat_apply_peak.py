"""One AdamW training step with a remat plan applied, metered to the byte by
remat's CPU meter (python/remat_measure; REMAT_METER_LIB). Prints one JSON
line: the plan's decisions and selective options, whether its schedule is
multi-level and how many blocks it recomputes selectively, its predicted peak and the measured peak of the second step
(the first creates AdamW's moments and records the selective blocks' ops),
weights, gradients and moments included.

  remat_apply_peak.py CONFIG.json MICRO_BATCH SEQ_LEN PLAN_OPTIONS_JSON
      a Hugging Face Llama built from CONFIG.json, planned from it; run
      without a KV cache (config.use_cache False), as transformers runs it
      under its own activation checkpointing;
  remat_apply_peak.py chain BLOCKS WIDTH ROWS PLAN_OPTIONS_JSON
      a user's own module: BLOCKS residual MLP blocks (WIDTH -> 2 WIDTH ->
      WIDTH, tanh) on ROWS x WIDTH inputs, mean square loss, planned from its
      remat.profile with every block's times set to 1 ms forward, 2 ms
      backward (the plan then depends on the measured bytes alone); the
      option "budget_over_lowest": F plans at (1 + F) x the lowest peak
      the strategy reaches. Also
      prints each block MLP's calls in the measured step, the blocks the
      plan's schedule recomputes, in order, and the largest
      gradient difference from the model without the plan, relative to
      each gradient's largest entry.
The option "outside_blocks" goes to remat.apply; "schedule": false applies
the plan without its schedule (each segment's recompute then keeps
everything, as the plan's layers alone say).
"""
import json
import sys

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402

import remat  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.Tanh(),
                                       torch.nn.Linear(2 * width, width))

    def forward(self, h):
        return h + self.mlp(h)


class Chain(torch.nn.Module):
    def __init__(self, blocks, width):
        super().__init__()
        self.layers = torch.nn.ModuleList(Block(width) for _ in range(blocks))

    def forward(self, h):
        for block in self.layers:
            h = block(h)
        return h


def llama(path, micro_batch, seq_len, options):
    options.pop("outside_blocks", None)
    options.pop("schedule", None)
    plan = remat.plan(path, micro_batch=micro_batch, seq_len=seq_len, precision="fp32",
                      device="cpu", **options)
    with open(path) as f:
        cfg = json.load(f)
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.AutoConfig.for_model("llama", **fields))
    model.config.use_cache = False
    model.train()

    def batch(i):
        torch.manual_seed(i)
        ids = torch.randint(0, cfg["vocab_size"], (micro_batch, seq_len))
        return lambda: model(input_ids=ids, labels=ids).loss

    return model, plan, batch


def chain(blocks, width, rows, options):
    torch.manual_seed(0)
    model = Chain(blocks, width)
    x = torch.randn(rows, width)
    loss = lambda out, inputs: out.pow(2).mean()
    profile = json.loads(json.dumps(remat.profile(model, (x,), loss_fn=loss, repeats=1).json))
    for layer in profile["layers"]:
        layer.update(forward_ms=1.0, backward_ms=2.0)
    options.pop("schedule", None)
    over = options.pop("budget_over_lowest", None)
    if over is not None:  # a budget just above the lowest peak the strategy reaches
        lowest = remat.plan(profile, **dict(options, budget="1B")).predicted_peak_bytes
        options["budget"] = f"{int(lowest * (1 + over))}B"
    return model, remat.plan(profile, **options), lambda i: lambda: loss(model(x), None)


def main():
    options = json.loads(sys.argv[-1])
    outside = options.get("outside_blocks", "refuse")
    follow = options.get("schedule", True)
    if sys.argv[1] == "chain":
        model, plan, batch = chain(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), options)
        batch(0)().backward()
        want = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
    else:
        model, plan, batch = llama(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), options)
        want = None
    applied = plan.json if follow else {k: v for k, v in plan.json.items() if k != "schedule"}
    remat.apply(model, applied, outside_blocks=outside)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    error = []

    def step(i):
        batch(i)().backward()
        if want is not None and i == 0:  # then dropped: the measured step holds no copies
            error.append(max(((p.grad - want.pop(n)).abs().max() / p.grad.abs().max()).item()
                             for n, p in model.named_parameters()))
        opt.step()
        opt.zero_grad()

    step(0)
    calls = []
    blocks = remat._blocks.find_blocks(model)[1]
    hooks = [b.mlp.register_forward_pre_hook(lambda m, a, i=i: calls.append(i))
             for i, b in enumerate(blocks)] if want is not None else []
    m = remat_measure.measure(step, 1, timeline=False)
    for hook in hooks:
        hook.remove()
    layers = [l for l in plan.layers if l["kind"] == "block"]
    result = {"strategy": plan.strategy, "parameter": plan.json["parameter"],
              "decisions": [l["decision"] for l in layers],
              "options": [l.get("selective_option") for l in layers],
              "multilevel": any(op["op"] == "recompute" and op.get("save") == "none"
                                and plan.layers[op["layer"]]["kind"] == "block"
                                for op in plan.json["schedule"]),
              "selective_recomputes": sum(1 for op in plan.json["schedule"]
                                          if op["op"] == "recompute" and op.get("save") == "selective"
                                          and plan.layers[op["layer"]]["kind"] == "block"),
              "predicted_peak_bytes": plan.predicted_peak_bytes,
              "measured_peak_bytes": m.baseline_bytes + m.peak_bytes}
    if want is not None:
        result["calls"] = calls
        result["recomputes"] = [layers.index(plan.layers[op["layer"]])
                                for op in plan.json["schedule"] if op["op"] == "recompute"
                                and plan.layers[op["layer"]]["kind"] == "block"]
        result["gradient_error"] = error[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
