"""One AdamW training step of a Hugging Face Llama built from CONFIG.json, with
a remat plan applied, metered to the byte by remat's CPU meter
(python/remat_measure; REMAT_METER_LIB). Prints one JSON line: the plan's
decisions and selective options, its predicted peak and the measured peak
of the second step (the first creates AdamW's moments and records the
selective blocks' ops), weights, gradients and moments included.

The model runs without a KV cache (config.use_cache False), as transformers
runs it under its own activation checkpointing.

usage: remat_apply_peak.py CONFIG.json MICRO_BATCH SEQ_LEN PLAN_OPTIONS_JSON
"""
import json
import sys

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402

import remat  # noqa: E402


def main():
    path, micro_batch, seq_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    plan = remat.plan(path, micro_batch=micro_batch, seq_len=seq_len, precision="fp32",
                      device="cpu", **json.loads(sys.argv[4]))
    with open(path) as f:
        cfg = json.load(f)
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.AutoConfig.for_model("llama", **fields))
    model.config.use_cache = False
    model.train()
    remat.apply(model, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        torch.manual_seed(i)
        ids = torch.randint(0, cfg["vocab_size"], (micro_batch, seq_len))
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()

    step(0)
    m = remat_measure.measure(step, 1, timeline=False)
    blocks = [l for l in plan.layers if l["kind"] == "block"]
    print(json.dumps({"strategy": plan.strategy, "parameter": plan.json["parameter"],
                      "decisions": [l["decision"] for l in blocks],
                      "options": [l.get("selective_option") for l in blocks],
                      "predicted_peak_bytes": plan.predicted_peak_bytes,
                      "measured_peak_bytes": m.baseline_bytes + m.peak_bytes}))


if __name__ == "__main__":
    main()
