"""One AdamW training step of a tiny model of bench/compile (tiny_models.py)
with a remat plan applied and the model then compiled whole (inductor, as
bench/compile/kept.py compiles it), metered to the byte by remat's CPU
meter (python/remat_measure). Prints one JSON line: the plan's decisions,
the predicted peak of the plan made with compile=True (the compiled trace,
docs/compile.md) and of the same strategy's plan from the eager model,
and the measured peak of the third step (the first compiles and creates
AdamW's moments), weights, gradients and moments included, and a fourth
step's peaks in its forward, backward and optimizer step apart.

  remat_compile_peak.py MODEL STRATEGY     MODEL: llama or gpt2; STRATEGY: none or uniform
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
from tiny_models import MODELS, build, plan_options, write_config  # noqa: E402


def main(name, strategy):
    with tempfile.TemporaryDirectory() as directory:
        path = write_config(name, directory)
        options = plan_options()
        # The trace runs transformers' default attention (sdpa) and takes no --attention.
        traced = {k: v for k, v in options.items() if k != "attention"}
        compiled = remat.plan(path, budget="1GB", strategy=strategy, compile=True, **traced)
        eager = remat.plan(path, budget="1GB", strategy=strategy, **options)
    model = build(name)
    remat.apply(model, compiled)
    run = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, MODELS[name]["vocab_size"], (options["micro_batch"], options["seq_len"]))

    def step(_=0):
        run(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()

    step()
    step()
    m = remat_measure.measure(step, 1, timeline=False, meter=meter)
    # One more step, its phases' peaks apart: where the peak is.
    phases = {}
    meter.reset_peak()
    loss = run(input_ids=ids, labels=ids).loss
    phases["forward"] = meter.peak_bytes()
    meter.reset_peak()
    loss.backward()
    del loss
    phases["backward"] = meter.peak_bytes()
    meter.reset_peak()
    opt.step()
    phases["optimizer"] = meter.peak_bytes()
    opt.zero_grad()
    print(json.dumps({
        "decisions": [l["decision"] for l in compiled.layers if l["kind"] == "block"],
        "source": compiled.json.get("profile", {}).get("source"),
        "predicted_peak_bytes": compiled.predicted_peak_bytes,
        "eager_predicted_peak_bytes": eager.predicted_peak_bytes,
        "measured_peak_bytes": m.baseline_bytes + m.peak_bytes,
        "measured_phase_peak_bytes": phases}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
