"""One AdamW training step of a tiny BERT (4 blocks, hidden 64, vocabulary
256, sdpa, fp32, dropout 0) in a SentenceTransformer (the model as
models.Transformer runs it, mean pooling) trained with
sentence-transformers' own MultipleNegativesRankingLoss on triplets
(2 x 32 tokens a text; the anchors in one forward, the other two columns
merged into a second, sentence-transformers' default), a remat plan made
with compile=True applied with remat.apply and the model then compiled
whole (inductor, static shapes), metered to the byte by remat's CPU meter
(python/remat_measure). Prints one JSON line as remat_compile_peak.py
does: the plan's decisions, the predicted peak of the plan made with
compile=True and of the same strategy's plan from the eager hand-written
model, the measured peak of the third step (the first compiles and
creates AdamW's moments; weights, gradients and moments included), and a
fourth step's peaks in its forward, backward and optimizer step apart.
The first step's gradients are checked against a float64 eager step of
the model without a plan: "gradient_error" is the largest of each
gradient's max |compiled - float64| over 2 K u max|float64 gradient| (K
the step's longest reduction: the vocabulary, the tokens of all texts or
the MLP's width; u = 2^-24; a bias's bound taken over its layer's weight
gradient where larger, below), at most 1 where the plan runs right.

  remat_sentence_compile_peak.py STRATEGY     none, uniform, selective or optimal

selective is the selective strategy's plan of its lowest peak; optimal the
optimal strategy's plan at the budget halfway between the uniform plan's
predicted peak and the none plan's (both with compile=True).
"""
import json
import os
import sys
import tempfile

import remat_compile_peak as base  # loads the meter before torch allocates anything
import torch  # noqa: E402

import remat  # noqa: E402

CONFIG = dict(model_type="bert", architectures=["BertModel"], hidden_size=64,
              intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, vocab_size=256,
              max_position_embeddings=64, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0)
MICRO_BATCH, SEQ_LEN, TEXTS = 2, 32, 3
JOB = dict(head="pooling", pooling="mean", loss="mnrl", texts_per_example=TEXTS)


def plans(path, strategy):
    """The plan of `strategy` made with compile=True, and the same
    strategy's plan of the eager hand-written model (remat_compile_peak)."""
    return base.plans(path, strategy, dict(JOB, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                                           precision="fp32", device="cpu", attention="sdpa"))


def build():
    """(SentenceTransformer, its MNRL loss), seeded, in training mode."""
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.modules import Pooling

    from remat._trace_sentence import Encoder

    fields = {k: v for k, v in CONFIG.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(CONFIG["model_type"], **fields)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = SentenceTransformer(modules=[Encoder(transformers.BertModel(config)),
                                         Pooling(config.hidden_size, "mean")], device="cpu")
    return model.train(), MultipleNegativesRankingLoss(model)


def batch():
    g = torch.Generator().manual_seed(1)
    shape = (MICRO_BATCH, SEQ_LEN)
    return [{"input_ids": torch.randint(5, CONFIG["vocab_size"], shape, generator=g),
             "attention_mask": torch.ones(shape, dtype=torch.long)} for _ in range(TEXTS)]


def main(strategy):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bert.json")
        with open(path, "w") as f:
            json.dump(CONFIG, f)
        compiled, eager = plans(path, strategy)
    features = batch()
    reference, reference_loss = build()
    reference.double()
    reference_loss([dict(f) for f in features], None).backward()
    want = {n: p.grad for n, p in reference.named_parameters()}
    del reference, reference_loss
    model, loss = build()
    remat.apply(model, compiled)
    loss.model = torch.compile(model, dynamic=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(_=0):
        loss([dict(f) for f in features], None).backward()
        opt.step()
        opt.zero_grad()

    loss([dict(f) for f in features], None).backward()
    reduction = max(CONFIG["vocab_size"], TEXTS * MICRO_BATCH * SEQ_LEN,
                    CONFIG["intermediate_size"])

    def scale(n):
        """max |float64 gradient| of parameter n; for a bias, of its layer's
        weight where larger: a bias's gradient sums the same per-token
        terms as the weight's (times inputs of order one after
        LayerNorm), and the attention's key bias sums them to zero
        (softmax ignores a shift over the keys), so its rounding error
        follows the terms, not the sum."""
        found = want[n].abs().max().item()
        weight = n[:-len("bias")] + "weight" if n.endswith(".bias") else None
        if weight in want and want[weight] is not None:
            found = max(found, want[weight].abs().max().item())
        return found

    def over_bound(n, p):
        if want[n] is None:  # the pooler: mean pooling gives it no gradient
            return 0.0 if p.grad is None else float("inf")
        err = (p.grad.double() - want[n]).abs().max().item()
        bound = 2 * reduction * 2.0 ** -24 * scale(n)
        return err / bound if bound else (0.0 if err == 0 else float("inf"))

    error = max(over_bound(n, p) for n, p in model.named_parameters())
    del want
    peak, phases = base.metered(step, lambda: loss([dict(f) for f in features], None), opt)
    base.report(compiled, eager, peak, error, phases)


if __name__ == "__main__":
    main(sys.argv[1])
