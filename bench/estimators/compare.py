"""remat's per-rank model-state terms beside the estimators users run.

For each model config and data-parallel world size N it computes
DeepSpeed's ZeRO-2 and ZeRO-3 estimates (the GPU figure of
`estimate_zero2_model_states_mem_needs_all_cold` /
`estimate_zero3_model_states_mem_needs_all_cold`, without offload),
accelerate's `estimate_training_usage` (the figure `accelerate estimate-memory`
prints as "Training using Adam", and its entries), and the terms of
`remat.plan` with the matching flags and precision convention.
docs/distributed.md, "Against the estimators users run", explains each
difference; tests/python/estimators_test.py asserts them.

    PYTHONPATH=build/python python bench/estimators/compare.py

Needs torch, transformers (parameter counts on the meta device), deepspeed
and accelerate in the Python that runs it.
"""
import json
import os
import shutil
import sys
import tempfile

SOURCE = os.environ.get("REMAT_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["llama-3-8b", "gpt2-xl", "mixtral-8x7b"]
WORLD_SIZES = [1, 8, 64]
SEQ_LEN = 1024
GiB = 1 << 30


def config_path(name):
    return os.path.join(SOURCE, "examples", "hf", name + ".config.json")


def hf_counts(name):
    """(Ψ, largest module's own parameters, root parameters, one block's
    parameters) of the transformers model built on the meta device.
    model.parameters() counts a tied embedding once, as DeepSpeed's
    model_to_params does through data_ptr (which is 0 for every meta tensor,
    so it cannot be called here); the largest module is model_to_params's."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(config_path(name), os.path.join(d, "config.json"))
        config = AutoConfig.from_pretrained(d)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    blocks = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)][0]
    block = sum(p.numel() for p in blocks[0].parameters())
    root = total - sum(p.numel() for p in blocks.parameters())
    return total, largest, root, block


def deepspeed_zero2(psi, n):
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    return estimate_zero2_model_states_mem_needs(psi, num_gpus_per_node=n, cpu_offload=False)[1]


def deepspeed_zero3(psi, largest, n):
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    _, gpu, _ = estimate_zero3_model_states_mem_needs(psi, largest, num_gpus_per_node=n,
                                                      cpu_offload=False)
    return gpu


def accelerate_usage(psi, dtype):
    """accelerate's entries for a model of Ψ fp32 parameters (the size
    `accelerate estimate-memory` passes: the empty model's, in fp32)."""
    from accelerate.commands.estimate import estimate_training_usage
    return estimate_training_usage(4 * psi, dtype)


def remat_terms(name, n, precision, grad_dtype=None, **flags):
    """predicted.per_rank[0].terms of remat.plan for `name` on n GPUs."""
    import remat
    with open(config_path(name)) as f:
        cfg = json.load(f)
    cfg["remat"] = {"precision": precision}
    if grad_dtype:
        cfg["remat"]["grad_dtype"] = grad_dtype
    if n > 1:
        flags["gpus"] = n
    # Two micro-batches, so that every gradient exists at the peak.
    p = remat.plan(cfg, "100TB", seq_len=SEQ_LEN, micro_batch=1, grad_accumulation=2, **flags)
    return p.json["predicted"]["per_rank"][0]["terms"]


def model_state(terms):
    return sum(terms.get(k, 0) for k in ("parameters", "gradients", "optimizer",
                                          "ddp_buckets", "fsdp_unsharded"))


def rows():
    """One dict per (model, N) with every figure, in bytes."""
    out = []
    for name in MODELS:
        psi, largest, root, block = hf_counts(name)
        for n in WORLD_SIZES:
            out.append({
                "model": name, "n": n, "psi": psi, "largest": largest, "root": root,
                "block": block,
                "ds_zero2": deepspeed_zero2(psi, n),
                "ds_zero3": deepspeed_zero3(psi, largest, n),
                "acc_fp32": accelerate_usage(psi, "float32"),
                "acc_bf16": accelerate_usage(psi, "bfloat16"),
                "zero2_bf16": remat_terms(name, n, "mixed_bf16", "bf16", zero=2),
                "zero2_fp32": remat_terms(name, n, "mixed_bf16", zero=2),
                "zero3_bf16": remat_terms(name, n, "mixed_bf16", "bf16", zero=3),
                "zero3_fp32": remat_terms(name, n, "mixed_bf16", zero=3),
                "ddp_amp": remat_terms(name, n, "amp_bf16", **({"ddp": True} if n > 1 else {"zero": 0})),
            })
    return out


def table(rs):
    g = lambda b: "{:.2f}".format(b / GiB)
    lines = ["| model | N | DeepSpeed ZeRO-2 | remat ZeRO-2 (bf16 grads) | remat ZeRO-2 (fp32 grads) "
             "| DeepSpeed ZeRO-3 | remat ZeRO-3 (bf16 grads) | remat ZeRO-3 (fp32 grads) | accelerate fp32 | accelerate bf16 "
             "| remat amp_bf16 (DDP) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["model"], r["n"], g(r["ds_zero2"]), g(model_state(r["zero2_bf16"])),
            g(model_state(r["zero2_fp32"])), g(r["ds_zero3"]), g(model_state(r["zero3_bf16"])),
            g(model_state(r["zero3_fp32"])),
            g(max(r["acc_fp32"].values())), g(max(r["acc_bf16"].values())),
            g(model_state(r["ddp_amp"]))))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write("GiB of model state per GPU (remat: parameters + gradients + optimizer "
                     "+ ddp_buckets + fsdp_unsharded; seq_len {})\n\n".format(SEQ_LEN))
    print(table(rows()))
