#!/usr/bin/env python3
"""One optimizer update of PEFT LoRA on a Hugging Face Llama, metered to the byte.

Builds the LlamaForCausalLM of a config.json (bench/fidelity/models/hf/) with random
weights, wraps it with peft's get_peft_model(LoraConfig(r, lora_alpha,
target_modules, lora_dropout)) as PEFT's users do, and trains it on CPU in
fp32 with torch.optim.AdamW over model.parameters() (the frozen base gets no
gradient, so AdamW keeps no state for it) and gradient accumulation: K
micro-batches of random token ids, each loss divided by K before backward,
the optimizer step and zero_grad after the K-th. With --checkpointing,
transformers' gradient_checkpointing_enable() (every decoder layer
recomputed in backward; transformers then makes the embedding output require
grad, enable_input_require_grads, so that gradients reach the adapters
through checkpoints).

Memory is metered by remat's CPU allocator (python/remat_measure), which sees
every tensor byte this process allocates; the printed peak is the highest
number of bytes in use during the measured update (the last one: the first
creates AdamW's moments), weights, adapters, gradients and moments included.
Prints one JSON line.

usage: peft_reference.py CONFIG.json [--checkpointing] [--rank 8]
       [--targets q_proj,v_proj] [--dropout 0.1] [--accumulation 4] [--steps 2]
       [--quantization nf4]   (bitsandbytes' Linear4bit in the decoder layers;
                               needs bitsandbytes, refused without it)
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import remat_measure  # noqa: E402


def quantize_blocks(torch, model):
    """bitsandbytes' QLoRA: every nn.Linear of the decoder layers becomes a
    Linear4bit in nf4 (blocks of 64, fp32 absmax, no double quantization, as
    BitsAndBytesConfig's defaults), computing in fp32; the embeddings and the
    LM head keep their dtype."""
    import gc
    import bitsandbytes as bnb
    for layer in model.model.layers:
        for parent in list(layer.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is not torch.nn.Linear:
                    continue
                q = bnb.nn.Linear4bit(child.in_features, child.out_features,
                                      bias=child.bias is not None, compute_dtype=torch.float32,
                                      quant_type="nf4", compress_statistics=False)
                q.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False,
                                             quant_type="nf4", compress_statistics=False,
                                             blocksize=64)
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(parent, name, q.to("cpu"))
    gc.collect()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=8)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--targets", default="q_proj,v_proj")
    ap.add_argument("--accumulation", type=int, default=4)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--quantization", choices=["none", "nf4"], default="none")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    remat_measure.load()  # $REMAT_METER_LIB, before torch allocates anything
    import torch
    import transformers
    import peft

    if args.quantization == "nf4":
        import importlib.util
        if importlib.util.find_spec("bitsandbytes") is None:
            raise SystemExit("peft_reference: --quantization nf4 needs bitsandbytes, "
                             f"which {sys.executable} lacks")
    torch.manual_seed(0)
    cfg = json.load(open(args.config))
    job = cfg["remat"]
    if job.get("precision", "fp32") != "fp32":
        raise SystemExit(f"{args.config}: remat.precision: only fp32 is run here")
    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items()
                                                  if not k.startswith("_") and k != "remat"})
    model = transformers.AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())  # before packing nf4
    if args.quantization == "nf4":
        quantize_blocks(torch, model)
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    lora = peft.LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=args.dropout,
                           target_modules=args.targets.split(","), task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    b, s, k = job["micro_batch"], job["seq_len"], args.accumulation

    def update(i):
        losses = []
        for m in range(k):
            torch.manual_seed(1000 * i + m)
            ids = torch.randint(0, config.vocab_size, (b, s))
            loss = model(input_ids=ids, labels=ids.clone()).loss / k
            loss.backward()
            losses.append(float(loss))
        opt.step()
        opt.zero_grad()
        return sum(losses)

    params += sum(p.numel() for p in model.parameters() if p.requires_grad)  # the adapters
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    for i in range(args.steps - 1):
        update(i)
    base_grads = [n for n, p in model.named_parameters() if not p.requires_grad and
                  p.grad is not None]
    assert not base_grads, base_grads
    m = remat_measure.measure(update, args.steps - 1, timeline=False)
    print(json.dumps({
        "config": args.config, "checkpointing": args.checkpointing,
        "attention": getattr(model.config, "_attn_implementation", "?"),
        "parameters": params, "trainable_parameters": trainable,
        "peak_bytes": m.baseline_bytes + m.peak_bytes, "bytes_before": m.baseline_bytes,
        "update_ms": m.wall_s * 1e3, "torch": torch.__version__, "peft": peft.__version__,
        "transformers": transformers.__version__,
    }))


if __name__ == "__main__":
    main()
