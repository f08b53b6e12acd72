"""One block of the end-to-end Llama (tests/python/remat_e2e_cells.py: hidden
64, GQA, micro-batch 2 x 128) alone under remat's CPU meter: the bytes a
forward leaves alive for the backward and the backward's peak above them,
plain, inside a selective checkpoint per option (remat._selective, the
option's recorded decisions) or, for "checkpoint", inside a whole
non-reentrant checkpoint (its recompute runs in the backward). Prints one
JSON line per run.

  remat_block_kept.py eager|sdpa [lora|sentence] OPTION...   (e.g. attention_core norm_output checkpoint)

"lora": the block of the e2e LoRA model (adapters on q and v), its input
requiring grad (as every block's but the first). "sentence": the last
block of the e2e sentence model's BERT, on the merged candidates' pass (4
texts of 64 tokens, no padding: no mask), the block whose backward is the
selective cell's peak.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remat_e2e_cells  # noqa: E402  (loads the meter before torch allocates)
import remat_measure  # noqa: E402
import torch  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from remat import _selective  # noqa: E402


def main():
    meter = remat_measure.load()
    model_kind = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] in ("lora", "sentence") else ""
    options = sys.argv[3:] if model_kind else sys.argv[2:]
    torch.manual_seed(0)
    if model_kind == "sentence":
        kind = remat_e2e_cells.Sentence({"attention": sys.argv[1]})
        bert = kind.build().train()[0].auto_model
        block = bert.encoder.layer[-1]
        texts = kind.micro_batch * (kind.texts - 1)
        ids = torch.randint(5, kind.config["vocab_size"], (texts, kind.seq_len))
        hidden = bert.embeddings(input_ids=ids).detach()

        def run(h):
            out = block(h)
            return out[0] if isinstance(out, tuple) else out
    else:
        lora = model_kind == "lora"
        kind = (remat_e2e_cells.Lora if lora else remat_e2e_cells.Llama)({"attention": sys.argv[1]})
        model = kind.build().train()
        decoder = model.base_model.model.model if lora else model.model
        block = decoder.layers[0]
        hidden = decoder.embed_tokens(kind.batch(0)).detach()
        positions = torch.arange(kind.seq_len)[None]
        rotary = decoder.rotary_emb(hidden, positions)
        mask = torch.full((kind.seq_len, kind.seq_len), float("-inf")).triu(1).expand(
            kind.micro_batch, 1, -1, -1).contiguous() if sys.argv[1] == "eager" else None

        def run(h):
            return block(h, attention_mask=mask, position_embeddings=rotary)

    for option in [None] + options:
        h = hidden.clone().requires_grad_()
        scopes = parts = None
        if option and option != "checkpoint":
            parts = tuple(option.split("+"))
            scopes = _selective.Scopes(block, parts, 0)
            decisions = _selective.record(run, h, parts, scopes)
        before = meter.current_bytes()
        if option == "checkpoint":
            out = checkpoint(run, h, use_reentrant=False)
        elif option:
            out = checkpoint(run, h, use_reentrant=False,
                             context_fn=_selective.context_fn(parts, scopes, decisions))
        else:
            out = run(h)
        after = meter.current_bytes()
        meter.reset_peak()
        out.sum().backward()
        print(json.dumps({"option": option or "plain", "forward_kept_bytes": after - before,
                          "backward_peak_over_forward_bytes": meter.peak_bytes() - after}))
        del out
        if scopes:
            scopes.remove()


if __name__ == "__main__":
    main()
