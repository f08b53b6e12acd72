"""One AdamW training step of a tiny model of bench/compile (tiny_models.py)
with a remat plan applied and the model then compiled whole (inductor, as
bench/compile/kept.py compiles it), metered to the byte by remat's CPU
meter (python/remat_measure). Prints one JSON line: the plan's decisions,
the predicted peak of the plan made with compile=True (the compiled trace,
docs/compile.md) and of the same strategy's plan from the eager model,
and the measured peak of the third step (the first compiles and creates
AdamW's moments), weights, gradients and moments included, and a fourth
step's peaks in its forward, backward and optimizer step apart.
The first step's gradients are checked against a float64 eager step of
the same model without a plan: "gradient_error" is the largest of each
gradient's max |compiled - float64| over its bound, 2 K u max|float64
gradient| (K the step's longest reduction, the vocabulary, the tokens or
the MLP's width; u = 2^-24, fp32's unit roundoff; the bound of
remat_compile_test.py), so at most 1 where the plan runs right.

  remat_compile_peak.py MODEL STRATEGY     MODEL: llama or gpt2; STRATEGY: none, uniform,
                                           selective or optimal

selective is the selective strategy's plan of its lowest peak; optimal the
optimal strategy's plan at the budget halfway between the uniform plan's
predicted peak and the none plan's (both with compile=True), where it
checkpoints some blocks and keeps others.
"""
import json
import os
import sys
import tempfile

import remat_measure

meter = remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402

import remat  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "compile"))
from tiny_models import MODELS, build, lowest_plan, plan_options, write_config  # noqa: E402


def plans(path, strategy, options):
    """The plan of `strategy` made with compile=True, and the same
    strategy's plan of the eager model."""
    # The trace runs transformers' default attention (sdpa) and takes no --attention.
    traced = dict({k: v for k, v in options.items() if k != "attention"}, compile=True)
    if strategy == "selective":
        return lowest_plan(path, strategy, **traced), lowest_plan(path, strategy, **options)
    if strategy == "optimal":
        low, high = (remat.plan(path, budget="1GB", strategy=s, **traced).predicted_peak_bytes
                     for s in ("uniform", "none"))
        budget = f"{(low + high) // 2}B"
        return (remat.plan(path, budget=budget, strategy=strategy, **traced),
                remat.plan(path, budget=budget, strategy=strategy, **options))
    return (remat.plan(path, budget="1GB", strategy=strategy, **traced),
            remat.plan(path, budget="1GB", strategy=strategy, **options))


def metered(step, loss_of, opt):
    """After the first step (its gradients still there): AdamW's step, one
    step more, then the third step metered, the process's bytes in use
    before it plus its peak (weights, gradients and moments included), and
    a fourth step's forward (loss_of()), backward and optimizer peaks apart:
    where the peak is. Returns (peak bytes, {phase: peak bytes})."""
    opt.step()
    opt.zero_grad()
    step()
    m = remat_measure.measure(step, 1, timeline=False, meter=meter)
    phases = {}
    meter.reset_peak()
    loss = loss_of()
    phases["forward"] = meter.peak_bytes()
    meter.reset_peak()
    loss.backward()
    del loss
    phases["backward"] = meter.peak_bytes()
    meter.reset_peak()
    opt.step()
    phases["optimizer"] = meter.peak_bytes()
    opt.zero_grad()
    return m.baseline_bytes + m.peak_bytes, phases


def report(compiled, eager, peak, error, phases):
    """Prints the cell's JSON line: the compiled plan's block decisions
    (and every layer's, by name), its budget and prediction, the eager
    plan's prediction, the measured peak and phases (metered) and the
    gradients' error over their bound."""
    print(json.dumps({
        "decisions": [l["decision"] for l in compiled.layers if l["kind"] == "block"],
        "layers": {l["name"]: l["decision"] for l in compiled.layers},
        "source": compiled.json.get("profile", {}).get("source"),
        "budget_bytes": compiled.budget_bytes,
        "fits": compiled.fits,
        "predicted_peak_bytes": compiled.predicted_peak_bytes,
        "eager_predicted_peak_bytes": eager.predicted_peak_bytes,
        "measured_peak_bytes": peak,
        "gradient_error": error,
        "measured_phase_peak_bytes": phases}))


def main(name, strategy):
    with tempfile.TemporaryDirectory() as directory:
        path = write_config(name, directory)
        options = plan_options()
        compiled, eager = plans(path, strategy, options)
    ids = torch.randint(0, MODELS[name]["vocab_size"], (options["micro_batch"], options["seq_len"]))
    reference = build(name).double()
    reference(input_ids=ids, labels=ids).loss.backward()
    want = {n: p.grad for n, p in reference.named_parameters()}
    del reference
    model = build(name)
    remat.apply(model, compiled)
    run = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(_=0):
        run(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()

    run(input_ids=ids, labels=ids).loss.backward()
    cfg = MODELS[name]
    reduction = max(cfg["vocab_size"], options["micro_batch"] * options["seq_len"],
                    cfg.get("intermediate_size", 4 * cfg.get("n_embd", 0)))

    def over_bound(n, p):
        err = (p.grad.double() - want[n]).abs().max().item()
        bound = 2 * reduction * 2.0 ** -24 * want[n].abs().max().item()
        return err / bound if bound else (0.0 if err == 0 else float("inf"))

    error = max(over_bound(n, p) for n, p in model.named_parameters())
    del want
    peak, phases = metered(step, lambda: run(input_ids=ids, labels=ids).loss, opt)
    report(compiled, eager, peak, error, phases)


if __name__ == "__main__":
    main(*sys.argv[1:3])
