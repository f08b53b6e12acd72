"""Tracing Llama-3-70B's config.json with remat.trace: the seconds and the
process's peak resident memory, and the traced parameter count against
transformers' own (the model built on the meta device). Exits 1 when the
counts differ.

    PYTHONPATH=build/python .venv/bin/python bench/trace/llama70b.py [--seq-len N]

Nothing is allocated for the model: its tensors are fake (docs/trace.md).
"""
import argparse
import resource
import sys
import time

LLAMA_3_70B = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=8192,
                   intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                   num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
                   rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                   hidden_act="silu", bos_token_id=128000, eos_token_id=128001,
                   dtype="bfloat16")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--micro-batch", type=int, default=1)
    args = parser.parse_args()
    import remat
    import torch
    import transformers

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    profile = remat.trace(LLAMA_3_70B, micro_batch=args.micro_batch, seq_len=args.seq_len,
                          precision="bf16", device="h200")
    seconds = time.perf_counter() - t
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**LLAMA_3_70B))
    expected = sum(p.numel() for p in model.parameters())
    got = profile.json["parameters"]
    print(f"Llama-3-70B, micro_batch {args.micro_batch} x seq_len {args.seq_len}, bf16: "
          f"traced in {seconds:.1f} s ({profile.json['trace']['traced_layers']} of "
          f"{len(profile.layers)} layers traced), peak RSS {peak_mib:.0f} MiB "
          f"({rss_before / 1024:.0f} MiB after imports)")
    print(f"parameters: traced {got:,}, transformers {expected:,} "
          f"({'equal' if got == expected else 'DIFFERENT'})")
    block = profile.layers[1]
    print(f"one block: activation {block['activation_bytes'] / 2**30:.2f} GiB, forward "
          f"{block['forward_ms']:.1f} ms, backward {block['backward_ms']:.1f} ms on h200")
    return 0 if got == expected else 1


if __name__ == "__main__":
    sys.exit(main())
