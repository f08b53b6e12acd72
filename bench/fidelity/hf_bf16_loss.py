"""A small transformers Llama trained in pure bf16 (weights, activations and
AdamW in bf16, no autocast) on the CPU, metered by remat's meter, against
remat's two predictions of the same step: the hand-written analytic model
(planner on the config.json) and the traced one (remat.trace). Prints the
three peaks and each prediction's error.

transformers' causal-LM loss upcasts the logits to fp32 before its
cross-entropy (loss_utils.ForCausalLMLoss: logits.float()), as
torchtitan's loss does; the trace runs that code, and the analytic model
(and remat's runtime) take the loss the same way (docs/fidelity.md).

    REMAT_METER_LIB=build/lib/libremat_cpu_meter.so PYTHONPATH=build/python:python \\
        .venv/bin/python bench/fidelity/hf_bf16_loss.py [micro_batch seq_len]
"""
import gc
import json
import os
import sys
import tempfile

import remat_measure

meter = remat_measure.load()  # before torch allocates anything

import torch  # noqa: E402
import transformers  # noqa: E402

import remat  # noqa: E402

CONFIG = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
              intermediate_size=160, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=256, max_position_embeddings=256,
              tie_word_embeddings=False, dtype="bfloat16")


def main(argv):
    micro_batch, seq_len = (int(argv[1]), int(argv[2])) if len(argv) > 2 else (4, 128)
    job = dict(micro_batch=micro_batch, seq_len=seq_len, device="cpu", precision="bf16")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "config.json")
        with open(path, "w") as f:
            json.dump(CONFIG, f)
        analytic = remat.plan(path, budget="1TB", strategy="none", attention="sdpa",
                              **job).predicted_peak_bytes
    traced = remat.plan(remat.trace(CONFIG, **job), budget="1TB",
                        strategy="none").predicted_peak_bytes
    gc.collect()
    start = meter.current_bytes()
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**CONFIG)
    cfg.use_cache = False
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).train()
    ids = torch.randint(0, CONFIG["vocab_size"], (micro_batch, seq_len))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
    step()  # AdamW's moments
    gc.collect()
    m = remat_measure.measure(step, timeline=False)
    measured = m.baseline_bytes + m.peak_bytes - start
    print(f"transformers Llama, pure bf16, CPU, {micro_batch} x {seq_len} tokens, vocabulary "
          f"{CONFIG['vocab_size']}, no checkpointing: measured {measured:,} B")
    for name, predicted in (("analytic (planner on config.json)", analytic),
                            ("traced (remat.trace)", traced)):
        print(f"  {name:36} {predicted:>12,} B  ({(measured - predicted) / predicted:+.2%})")


if __name__ == "__main__":
    main(sys.argv)
