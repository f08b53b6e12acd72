"""remat end to end on a user's own model: plan at a budget between
"checkpoint every block" and "none", remat.apply the plan to the real
Hugging Face / sentence-transformers / PEFT model, train two AdamW steps
metered to the byte by remat's CPU meter (python/remat_measure;
REMAT_METER_LIB), and check the gradients against the unwrapped model's.

Models (tiny: hidden 64, fp32 on CPU, dropout 0, random weights):
  llama     transformers' LlamaForCausalLM, GQA (4 query heads, 2 KV heads),
            eager attention; causal-LM loss on random token ids;
  sentence  a BERT encoder in a SentenceTransformer with mean pooling,
            trained with MultipleNegativesRankingLoss on (anchor, positive,
            negative) triplets of random token ids (remat: --head pooling
            --loss mnrl --texts-per-example 3);
  lora      the llama above wrapped by peft's get_peft_model(LoraConfig(r=8,
            q_proj and v_proj)) (remat: --lora-rank 8 --lora-targets q,v).

A cell is {"name", "strategy", "at"} (plus any remat.plan option, and
optionally "model": {"config": {config.json fields}, "micro_batch",
"seq_len", "attention"} changing the model or job for that cell, and
"apply": {remat.apply keywords}): the
budget is every1 + at x (none - every1) bytes, every1 and none being the
predicted peaks of remat.plan with strategy uniform every 1 and strategy
none for that model and job. Per cell the model is built afresh (seed 0), the plan applied, two
steps trained (the first creates AdamW's moments; the second is metered:
the process's bytes in use before it plus its peak, weights, gradients and
moments included), then one more backward on a fixed batch with the plan
applied and, after remat.unapply, without it, both from zeroed gradients:
the largest |difference| over each parameter's gradient relative to that
gradient's largest |value|. For strategy optimal the same job at the same
budget is planned with optimal-single too (single_level_step_ms), so that a
test can tell a multi-level plan (faster than any single-level one) from a
single-level one.

Prints one JSON line per cell.

usage: remat_e2e_cells.py llama|sentence|lora CELLS.json
"""
import gc
import json
import os
import sys
import tempfile

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402

import remat  # noqa: E402

LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
             intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256, max_position_embeddings=256,
             rms_norm_eps=1e-6, tie_word_embeddings=False, attention_dropout=0.0)
BERT = dict(model_type="bert", architectures=["BertModel"], hidden_size=64,
            intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, vocab_size=256,
            max_position_embeddings=256, type_vocab_size=2, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
LORA = dict(lora_rank=8, lora_alpha=16, lora_targets="q_proj,v_proj")


def hf_config(cfg, attention):
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    config._attn_implementation = attention
    return config


class Model:
    """A model and its job; `model` (a cell's "model") changes either."""
    attention = "eager"
    plan_options = {}

    def __init__(self, model=None):
        model = dict(model or {})
        self.config = dict(self.config, **model.pop("config", {}))
        for key, value in model.items():
            if key not in ("micro_batch", "seq_len", "attention"):
                raise SystemExit(f"cell model: unknown key {key}")
            setattr(self, key, value)

    def plan(self, path, **options):
        options = dict(self.plan_options, attention=self.attention, **options)
        return remat.plan(path, micro_batch=self.micro_batch, seq_len=self.seq_len,
                          precision="fp32", device="cpu", **options)


class Llama(Model):
    config, micro_batch, seq_len = LLAMA, 2, 128

    def build(self):
        model = transformers.LlamaForCausalLM(hf_config(self.config, self.attention))
        model.config.use_cache = False  # training: no KV cache
        return model

    def batch(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, self.config["vocab_size"], (self.micro_batch, self.seq_len),
                            generator=g)
        return ids

    def loss(self, model, ids):
        return model(input_ids=ids, labels=ids).loss


class Lora(Llama):
    plan_options = dict(lora_rank=8, lora_targets="q,v")

    def build(self):
        import peft
        model = super().build()
        lora = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                               target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
        return peft.get_peft_model(model, lora)


class Sentence(Model):
    """BertModel (AutoModel's, with its pooler, which mean pooling leaves
    without gradients) as a SentenceTransformer module, what
    models.Transformer does without a tokenizer; mean pooling; MNRL over
    triplets, the anchors in one forward and the other columns merged in a
    second (sentence-transformers' default)."""
    config, micro_batch, seq_len, texts = BERT, 2, 64, 3
    plan_options = dict(head="pooling", pooling="mean", loss="mnrl", texts_per_example=3)

    def build(self):
        from sentence_transformers import SentenceTransformer, losses, models

        from remat._trace_sentence import Encoder as AutoModule  # models.Transformer, no tokenizer

        config = hf_config(self.config, self.attention)
        auto = transformers.BertModel(config)
        pooling = models.Pooling(config.hidden_size, "mean")
        model = SentenceTransformer(modules=[AutoModule(auto), pooling],
                                    device="cpu")
        self.mnrl = losses.MultipleNegativesRankingLoss(model)
        return model

    def batch(self, i):
        g = torch.Generator().manual_seed(i)
        shape = (self.micro_batch, self.seq_len)
        return [{"input_ids": torch.randint(5, self.config["vocab_size"], shape, generator=g),
                 "attention_mask": torch.ones(shape, dtype=torch.long)}
                for _ in range(self.texts)]

    def loss(self, model, features):
        return self.mnrl([dict(f) for f in features], None)


MODELS = {"llama": Llama, "lora": Lora, "sentence": Sentence}


def gradients(kind, model, batch):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    kind.loss(model, batch).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def run_cell(kind_class, directory, cell):
    kind = kind_class(cell.get("model"))
    path = os.path.join(directory, cell["name"] + ".config.json")
    with open(path, "w") as f:
        json.dump(kind.config, f)
    every1 = kind.plan(path, budget="1TB", strategy="uniform", every=1).predicted_peak_bytes
    none = kind.plan(path, budget="1TB", strategy="none").predicted_peak_bytes
    options = {k: v for k, v in cell.items() if k not in ("name", "at", "model", "apply")}
    budget = int(every1 + cell["at"] * (none - every1))
    plan = kind.plan(path, budget=f"{budget}B", **options)
    single = (kind.plan(path, budget=f"{budget}B", **dict(options, strategy="optimal-single"))
              if cell.get("strategy") == "optimal" else plan)
    torch.manual_seed(0)
    model = kind.build().train()
    out = {"name": cell["name"], "strategy": plan.strategy, "parameter": plan.parameter,
           "fits": plan.fits, "budget_bytes": plan.budget_bytes,
           "every1_bytes": every1, "none_bytes": none,
           "predicted_peak_bytes": plan.predicted_peak_bytes, "step_ms": plan.step_ms,
           "single_level_step_ms": single.step_ms,
           "layers": [[l["name"], l["decision"], l.get("selective_option")] for l in plan.layers]}
    try:
        remat.apply(model, plan, **cell.get("apply", {}))
    except remat.InputError as e:
        out["refused"] = str(e)
        return out
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        torch.manual_seed(i)
        kind.loss(model, kind.batch(i)).backward()
        opt.step()
        opt.zero_grad()

    step(0)
    m = remat_measure.measure(step, 1, timeline=False)
    out["measured_peak_bytes"] = m.baseline_bytes + m.peak_bytes
    batch = kind.batch(100)
    got = gradients(kind, model, batch)
    remat.unapply(model)
    want = gradients(kind, model, batch)
    out["gradients"] = len(want)
    out["same_gradient_names"] = sorted(got) == sorted(want)
    out["gradient_error"] = max(((got[n] - w).abs().max() / w.abs().max().clamp_min(1e-30)).item()
                                for n, w in want.items() if n in got)
    del model, opt, got, want
    return out


def main():
    kind = MODELS[sys.argv[1]]
    with open(sys.argv[2]) as f:
        cells = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for cell in cells:
            print(json.dumps(run_cell(kind, tmp, cell)), flush=True)
            gc.collect()


if __name__ == "__main__":
    main()
