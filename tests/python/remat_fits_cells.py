"""FITS on the user's model: the default remat.plan of a decoder's
config.json, remat.apply on the Hugging Face model built from it, and one
metered training step (forward, loss, backward, AdamW step), as a user
following docs/python.md runs it.

A cell is {"name", "family", "at"} (plus "range" and any remat.plan
option): the model is the family's config (FAMILIES, GQA, tiny but real
shapes), fp32 on CPU, dropout 0; the budget is low + at x (high - low)
bytes plus one, where low is the lowest peak any plan reaches (strategy
optimal with the chunked loss, auto's chunk count) and high the peak of the
plain job without checkpointing; with "range": "plain", low is the plain
job's peak with every block checkpointed (strategy uniform, every 1), as
a user who brackets a budget between those two plans chooses it. The plan
is remat.plan's
default (strategy auto, which weighs the chunked loss) with the cell's
options. Per cell the model is built afresh (seed 0) with transformers'
default attention (sdpa) and planned for it, the plan applied, two steps
trained (the first creates AdamW's moments), the second metered by remat's
CPU meter (python/remat_measure; REMAT_METER_LIB: the process's bytes in
use before it plus its peak, weights, gradients, moments and batch
included). Then one backward on a fixed batch with the plan applied and,
after remat.unapply, without it, both from zeroed gradients: the largest
|difference| over each parameter's gradient relative to that gradient's
largest |value|, and both losses.

Prints one JSON line per cell.

usage: remat_fits_cells.py CELLS.json
"""
import gc
import json
import os
import sys
import tempfile

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402

import remat  # noqa: E402

# Tiny but real decoder shapes: GQA (4 query heads, 2 KV heads of 32),
# SwiGLU MLPs, a vocabulary 64 x the hidden size (the head's logits are the
# step's largest tensors, as in the released models), and each family's own
# features: Mistral's sliding window (wider than the sequence), Qwen2's
# q/k/v biases and tied embeddings.
COMMON = dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, vocab_size=8192,
              max_position_embeddings=1024, rms_norm_eps=1e-6, attention_dropout=0.0,
              use_cache=False)
FAMILIES = {
    "llama": dict(COMMON, model_type="llama", architectures=["LlamaForCausalLM"],
                  tie_word_embeddings=False),
    "mistral": dict(COMMON, model_type="mistral", architectures=["MistralForCausalLM"],
                    sliding_window=4096, tie_word_embeddings=False),
    "qwen2": dict(COMMON, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                  tie_word_embeddings=True, use_sliding_window=False, sliding_window=4096,
                  max_window_layers=4),
}
MICRO_BATCH, SEQ_LEN, ATTENTION = 4, 512, "sdpa"


def build(cfg):
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    config._attn_implementation = ATTENTION
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.config.use_cache = False
    return model.train()


def batch(cfg, i):
    g = torch.Generator().manual_seed(i)
    ids = torch.randint(0, cfg["vocab_size"], (MICRO_BATCH, SEQ_LEN), generator=g)
    labels = ids.clone()
    labels[:, :3] = -100  # a prompt without targets, as a chat template masks it
    return ids, labels


def plan(path, **options):
    return remat.plan(path, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, precision="fp32",
                      device="cpu", attention=ATTENTION, **options)


def loss_of(model, data):
    ids, labels = data
    return model(input_ids=ids, labels=labels).loss


def gradients(model, data):
    model.zero_grad(set_to_none=True)
    loss = loss_of(model, data)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()
                         if p.grad is not None}


def run_cell(directory, cell):
    cfg = FAMILIES[cell["family"]]
    path = os.path.join(directory, cell["family"] + ".config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    if cell.get("range") == "plain":
        low = plan(path, budget="1TB", strategy="uniform", every=1).predicted_peak_bytes
    else:
        low = plan(path, budget="1B", strategy="optimal", chunked_loss="auto").predicted_peak_bytes
    high = plan(path, budget="1TB", strategy="none").predicted_peak_bytes
    budget = low + 1 + int(cell["at"] * (high - low))
    options = {k: v for k, v in cell.items() if k not in ("name", "family", "at", "range")}
    chosen = plan(path, budget=f"{budget}B", **options)
    profile = chosen.json["profile"]
    out = {"name": cell["name"], "family": cell["family"], "strategy": chosen.strategy,
           "parameter": chosen.parameter, "fits": chosen.fits, "budget_bytes": budget,
           "low_bytes": low, "high_bytes": high,
           "loss_chunks": chosen.json["job"].get("loss_chunks", 0),
           "predicted_peak_bytes": chosen.predicted_peak_bytes,
           "hidden_state_bytes": profile["layers"][1]["input_bytes"],
           "selective": [l.get("selective_option") for l in chosen.layers
                         if l["decision"] == "selective"],
           "outside_blocks": [[l["name"], l["decision"]] for l in chosen.layers
                              if "block" not in l["name"] and l["decision"] != "keep"]}
    torch.manual_seed(0)
    model = build(cfg)
    try:
        remat.apply(model, chosen)
    except remat.InputError as e:
        out["refused"] = str(e)
        return out
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        loss_of(model, batch(cfg, i)).backward()
        opt.step()
        opt.zero_grad()

    step(0)
    m = remat_measure.measure(step, 1, timeline=False)
    out["measured_peak_bytes"] = m.baseline_bytes + m.peak_bytes
    fixed = batch(cfg, 100)
    out["logits_returned"] = model(input_ids=fixed[0], labels=fixed[1]).logits is not None
    out["loss"], got = gradients(model, fixed)
    remat.unapply(model)
    out["plain_loss"], want = gradients(model, fixed)
    out["same_gradient_names"] = sorted(got) == sorted(want)
    out["gradient_error"] = max(((got[n] - w).abs().max() / w.abs().max().clamp_min(1e-30)).item()
                                for n, w in want.items() if n in got)
    del model, opt, got, want
    return out


def main():
    with open(sys.argv[1]) as f:
        cells = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for cell in cells:
            print(json.dumps(run_cell(tmp, cell)), flush=True)
            gc.collect()


if __name__ == "__main__":
    main()
