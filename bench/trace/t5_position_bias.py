"""What T5's position bias's gradient costs a step (docs/trace.md, "Known
misses"): the
small T5 of tests/python/remat_trace_graph_test.py (fp32, CPU, 2 x 64
tokens, 3 + 3 blocks, 4 heads) traced as a graph, planned with nothing
checkpointed and with every block checkpointed (uniform every 1), each plan
applied by remat.apply to a fresh model trained one AdamW step, metered by
remat's CPU meter; once as transformers runs T5, once with each stack's
relative position bias made without grad (T5Attention.compute_bias's
output detached: no gradient for relative_attention_bias, nothing of the
bias's autograd graph kept). Prints the predicted and metered peaks and
their difference for each.

    PYTHONPATH=build/python:python .venv/bin/python bench/trace/t5_position_bias.py
"""
import gc

import remat_measure

remat_measure.load()  # before torch allocates anything

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.models.t5 import modeling_t5  # noqa: E402

import remat  # noqa: E402

MICRO_BATCH, SEQ_LEN = 2, 64
T5 = dict(model_type="t5", architectures=["T5ForConditionalGeneration"], d_model=64, d_ff=128,
          num_layers=3, num_decoder_layers=3, num_heads=4, d_kv=16, vocab_size=128,
          relative_attention_num_buckets=8, dropout_rate=0.0, decoder_start_token_id=0,
          pad_token_id=0, eos_token_id=1)
PLANS = {"none": dict(strategy="none"), "every 1": dict(strategy="uniform", every=1)}


def applied_step(profile, which):
    plan = remat.plan(profile, budget="1TB", **PLANS[which])
    gc.collect()
    meter = remat_measure.load()
    start = meter.current_bytes()
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**T5)
    cfg.use_cache = False
    model = remat.apply(transformers.T5ForConditionalGeneration(cfg).train(), plan)
    ids = (MICRO_BATCH, SEQ_LEN)
    batch = {"input_ids": torch.randint(4, T5["vocab_size"], ids),
             "labels": torch.randint(4, T5["vocab_size"], ids)}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad()
    step()  # AdamW's moments made; the second step is metered
    gc.collect()
    m = remat_measure.measure(step, timeline=False)
    return plan.predicted_peak_bytes, m.baseline_bytes + m.peak_bytes - start


def main():
    profile = remat.trace(T5, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu")
    compute_bias = modeling_t5.T5Attention.compute_bias
    print(f"{'position bias':<16} {'plan':<8} {'predicted B':>12} {'metered B':>12} "
          f"{'metered - predicted':>20}")
    for bias in ("with grad", "without grad"):
        if bias == "without grad":
            modeling_t5.T5Attention.compute_bias = (
                lambda self, *a, **k: compute_bias(self, *a, **k).detach())
        for which in PLANS:
            predicted, measured = applied_step(profile, which)
            print(f"{bias:<16} {which:<8} {predicted:>12,} {measured:>12,} "
                  f"{measured - predicted:>+13,} ({(measured - predicted) / predicted:+.2%})")
    modeling_t5.T5Attention.compute_bias = compute_bias


if __name__ == "__main__":
    main()
