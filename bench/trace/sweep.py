"""The architectures people fine-tune, each from transformers' default
config for its model_type (AutoConfig.for_model, saved as config.json),
through `python -m remat trace` (one child process each, so that one
model's failure is its own line) and, where traced, `planner` on the
profile. Prints one line per architecture: the plan, or the one-line
reason it is refused.

    PYTHONPATH=build/python PLANNER=build/bin/planner .venv/bin/python bench/trace/sweep.py \\
        [--seq-len 256] [--timeout 600] [model_type ...]

Two towers (CLIP, SigLIP) trace texts of their text tower's
max_position_embeddings where --seq-len is longer.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ARCHITECTURES = ["modernbert", "mpnet", "nomic_bert", "electra", "t5", "bart", "whisper", "vit",
                 "dinov2", "clip", "siglip", "qwen2_5_vl", "gpt_oss", "deepseek_v3", "qwen2_moe",
                 "qwen3_next", "olmo2", "llama4", "smollm3", "granite", "glm4", "cohere2",
                 "mistral3", "phi", "falcon", "gpt_neox", "stablelm", "xlm-roberta", "gemma3",
                 "qwen3"]


def default_config(model_type, path, seq_len):
    """Writes the default config.json at `path`; returns the tokens a
    sequence: `seq_len`, or two towers' (CLIP's, SigLIP's) text tower's
    max_position_embeddings where shorter (its texts' length)."""
    import transformers

    import remat
    from remat._trace_build import default_class, model_class

    config = transformers.AutoConfig.for_model(model_type)
    try:  # its causal-LM (else masked-LM, else base; an encoder-decoder's
        # sequence-to-sequence) class, as a published config names it
        config.architectures = [default_class(config).__name__]
        if model_class(config)[1] == "two_towers":
            text = config.get_text_config()
            seq_len = min(seq_len, getattr(text, "max_position_embeddings", None) or seq_len)
    except remat.InputError:
        pass  # the trace refuses it in its own words
    config.save_pretrained(os.path.dirname(path))
    return seq_len


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("types", nargs="*", default=ARCHITECTURES)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args()
    planner = os.environ.get("PLANNER", "build/bin/planner")
    for model_type in args.types:
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "config.json")
            try:
                seq_len = default_config(model_type, config, args.seq_len)
            except Exception as e:
                print(f"{model_type:12s} refused: transformers cannot make its default config "
                      f"({type(e).__name__})", flush=True)
                continue
            profile = os.path.join(d, "profile.json")
            t = time.perf_counter()
            try:
                r = subprocess.run([sys.executable, "-W", "ignore", "-m", "remat", "trace", config,
                                    "-o", profile, "--seq-len", str(seq_len),
                                    "--precision", "bf16"],
                                   capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"{model_type:12s} not traced in {args.timeout} s", flush=True)
                continue
            seconds = time.perf_counter() - t
            if r.returncode != 0:
                line = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
                print(f"{model_type:12s} refused ({seconds:.0f} s): {line}", flush=True)
                continue
            with open(profile) as f:
                p = json.load(f)
            plan = subprocess.run([planner, "--budget", "80GB", "--json", profile],
                                  capture_output=True, text=True)
            if "chains" in p:  # a graph profile (docs/graphs.md)
                chains = [c["profile"] for c in p["chains"]]
                p = {"trace": chains[0]["trace"], "layers": [l for c in chains for l in c["layers"]],
                     "parameters": sum(c["parameters"] for c in chains)}
                if plan.returncode in (0, 3):
                    out = json.loads(plan.stdout)
                    kept = [sum(d != "keep" for d in c["decisions"]) for c in out["chains"]]
                    what = (f"graph of {len(kept)} chains, checkpointed "
                            f"{' + '.join(map(str, kept))} layers, peak "
                            f"{out['peak_bytes'] / 2**30:.2f} GiB"
                            f"{'' if plan.returncode == 0 else ' (does not fit 80GB)'}")
                else:
                    what = "planner: " + (plan.stderr.strip().splitlines() or [""])[-1]
            elif plan.returncode in (0, 3):
                out = json.loads(plan.stdout)
                what = (f"plans: {out['strategy']}, peak "
                        f"{out['predicted']['peak_bytes'] / 2**30:.2f} GiB"
                        f"{'' if plan.returncode == 0 else ' (does not fit 80GB)'}")
            else:
                what = "planner: " + (plan.stderr.strip().splitlines() or [""])[-1]
            tokens = "" if seq_len == args.seq_len else f", {seq_len} tokens"
            print(f"{model_type:12s} traced in {seconds:.0f} s ({p['trace']['traced_layers']} of "
                  f"{len(p['layers'])} layers, {p['parameters']:,} parameters{tokens}); {what}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
