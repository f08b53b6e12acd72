"""What the soft-capped chunked loss saves on a Gemma 2 causal LM, predicted
and metered: examples/hf/gemma-2-2b.config.json shrunk (2 layers, hidden
64, 4 query and 2 KV heads of 16, its real 256,000-token vocabulary, tied
embeddings, final_logit_softcapping 30 and attention soft-capping 50,
eager attention, dropout 0), fp32 on CPU, micro-batch 2 x 64 tokens. Per
job (`chunked_loss` 0, then 8): remat.plan (strategy none) and its
predicted peak, the model built afresh (seed 0), remat.apply, two training
steps (forward with labels, backward, AdamW step; the first creates AdamW's
moments), the second metered by remat's CPU meter (python/remat_measure,
loaded before torch allocates: the process's bytes in use before the step
plus the step's peak).

Prints one JSON line per job: {"chunked_loss", "predicted_peak_bytes",
"measured_peak_bytes", "loss_chunks"}.

usage: remat_chunked_loss_saving.py DIRECTORY
"""
import gc
import json
import os
import sys

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402

import remat  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GEMMA2 = os.path.join(HERE, "..", "..", "examples", "hf", "gemma-2-2b.config.json")
SHRUNK = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=256, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
              max_position_embeddings=256, sliding_window=32, use_cache=False,
              tie_word_embeddings=True)
MICRO_BATCH, SEQ_LEN, CHUNKS = 2, 64, 8


def config_file(directory):
    with open(GEMMA2) as f:
        cfg = json.load(f)
    cfg.update(SHRUNK)
    del cfg["torch_dtype"]  # fp32, from_config's dtype
    path = os.path.join(directory, "gemma-2-small.config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return cfg, path


def build(cfg):
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.config.use_cache = False
    return model.train()


def batch(cfg, i):
    g = torch.Generator().manual_seed(i)
    ids = torch.randint(0, cfg["vocab_size"], (MICRO_BATCH, SEQ_LEN), generator=g)
    labels = ids.clone()
    labels[:, :3] = -100
    return ids, labels


def run(cfg, path, chunks):
    plan = remat.plan(path, budget="1TB", micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                      precision="fp32", device="cpu", attention="eager", strategy="none",
                      chunked_loss=chunks)
    torch.manual_seed(0)
    model = build(cfg)
    remat.apply(model, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        ids, labels = batch(cfg, i)
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()

    step(0)
    m = remat_measure.measure(step, 1, timeline=False)
    out = {"chunked_loss": chunks, "loss_chunks": plan.json["job"].get("loss_chunks", 0),
           "predicted_peak_bytes": plan.predicted_peak_bytes,
           "measured_peak_bytes": m.baseline_bytes + m.peak_bytes}
    remat.unapply(model)
    del model, opt
    gc.collect()
    return out


def main():
    cfg, path = config_file(sys.argv[1])
    for chunks in (0, CHUNKS):
        print(json.dumps(run(cfg, path, chunks)), flush=True)


if __name__ == "__main__":
    main()
