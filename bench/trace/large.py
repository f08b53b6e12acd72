"""Tracing a large model's config.json with remat.trace: the seconds (the
Python imports apart), the process's peak resident memory, and the traced
parameter count against transformers' own (the model built on the meta
device). Exits 1 when the counts differ. One model a run, so that the peak
resident memory is that model's.

    PYTHONPATH=build/python .venv/bin/python bench/trace/large.py llama-3-70b
    PYTHONPATH=build/python .venv/bin/python bench/trace/large.py deepseek-v3

Nothing is allocated for the model: its tensors are fake (docs/trace.md).
The configs are the published config.json files (DeepSeek-V3's without its
FP8 quantization_config: the trace is of bf16 training).
"""
import argparse
import resource
import sys
import time

CONFIGS = {
    "llama-3-70b": dict(
        model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=8192,
        intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, hidden_act="silu",
        bos_token_id=128000, eos_token_id=128001, dtype="bfloat16"),
    "deepseek-v3": dict(
        model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
        attention_bias=False, attention_dropout=0.0, bos_token_id=0, eos_token_id=1,
        first_k_dense_replace=3, hidden_act="silu", hidden_size=7168,
        initializer_range=0.02, intermediate_size=18432, kv_lora_rank=512,
        max_position_embeddings=163840, moe_intermediate_size=2048, moe_layer_freq=1,
        n_group=8, n_routed_experts=256, n_shared_experts=1, norm_topk_prob=True,
        num_attention_heads=128, num_experts_per_tok=8, num_hidden_layers=61,
        num_key_value_heads=128, num_nextn_predict_layers=1, q_lora_rank=1536,
        qk_nope_head_dim=128, qk_rope_head_dim=64, rms_norm_eps=1e-6,
        rope_scaling=dict(beta_fast=32, beta_slow=1, factor=40, mscale=1.0, mscale_all_dim=1.0,
                          original_max_position_embeddings=4096, type="yarn"),
        rope_theta=10000, routed_scaling_factor=2.5, scoring_func="sigmoid",
        tie_word_embeddings=False, topk_group=4, topk_method="noaux_tc", v_head_dim=128,
        vocab_size=129280, dtype="bfloat16"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(CONFIGS))
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--micro-batch", type=int, default=1)
    args = parser.parse_args()
    config = CONFIGS[args.model]
    t = time.perf_counter()
    import remat
    import torch
    import transformers
    from remat._trace_build import hf_config, model_class

    model_class(hf_config(dict(config)))  # imports the family's modeling module
    imports = time.perf_counter() - t
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    profile = remat.trace(config, micro_batch=args.micro_batch, seq_len=args.seq_len,
                          precision="bf16")
    seconds = time.perf_counter() - t
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config(dict(config)))
    expected = sum(p.numel() for p in model.parameters())
    got = profile.json["parameters"]
    print(f"{args.model}, micro_batch {args.micro_batch} x seq_len {args.seq_len}, bf16: "
          f"traced in {seconds:.1f} s ({profile.json['trace']['traced_layers']} of "
          f"{len(profile.layers)} layers traced; imports {imports:.1f} s before), "
          f"peak RSS {peak_mib:.0f} MiB ({rss_before / 1024:.0f} MiB after imports)")
    print(f"parameters: traced {got:,}, transformers {expected:,} "
          f"({'equal' if got == expected else 'DIFFERENT'})")
    return 0 if got == expected else 1


if __name__ == "__main__":
    sys.exit(main())
