"""`planner --export hf` applied as printed: transformers' Trainer, built
from the exported TrainingArguments fields, trains a tiny Llama (GQA, fp32
on CPU, random weights) for two steps, metered by remat's CPU meter
(python/remat_measure; REMAT_METER_LIB) over the whole trainer.train()
call: the process's bytes in use before it (weights, the two micro-batches
of token ids) plus its peak (AdamW's moments, created by the first step,
are in use all through the second).

A cell is {"name", "at" (the budget, a fraction: every1 + at x (none -
every1) bytes, as remat_e2e_cells.py; null: no budget), "plan":
{remat.plan options}}. The plan is
exported with Plan.export("hf"); where its note says hf expresses the plan
("runs the plan exactly") the fields go to TrainingArguments as printed
and the Trainer's own activation checkpointing runs the plan; where it does
not, the note says remat.apply(model, plan) applies the plan exactly, and
so the model gets remat.apply and the fields go in without the
checkpointing switch (transformers' checkpointing and remat.apply on the
same blocks are refused by remat.apply). Beside every TrainingArguments
field the export sets: max_steps 2, no evaluation, no saving, no logging,
the AdamW of torch, a temporary output_dir, use_cpu.

transformers' activation offload (the `offload` kwarg) runs each
checkpoint under its module's save_on_cpu; that class is replaced by a
subclass whose pack hook counts the bytes it is handed and calls
save_on_cpu's own (what the Trainer runs is unchanged). On a CPU the
packed copies land in the same memory as everything else, so the meter
sees no saving; the bytes moved per forward and the trained weights (a
digest of every parameter's bytes) are reported instead.

Prints one JSON line per cell.

usage: remat_trainer_peak.py CELLS.json
"""
import contextlib
import hashlib
import json
import os
import sys
import tempfile

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402
import transformers.modeling_utils  # noqa: E402

import remat  # noqa: E402

LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
             intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256, max_position_embeddings=256,
             rms_norm_eps=1e-6, tie_word_embeddings=False, attention_dropout=0.0)
MICRO_BATCH, SEQ_LEN, STEPS = 2, 128, 2
PLAN_OPTIONS = dict(micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, precision="fp32", device="cpu",
                    attention="eager")
CHECKPOINTING = ("gradient_checkpointing", "gradient_checkpointing_kwargs")


# The bytes of each tensor transformers' offload packed for the host.
PACKED = []


class CountedSaveOnCpu(transformers.modeling_utils.save_on_cpu):
    """transformers' save_on_cpu, each tensor its pack hook is handed counted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        pack = self.pack_hook

        def counted(tensor):
            PACKED.append(tensor.numel() * tensor.element_size())
            return pack(tensor)

        self.pack_hook = counted


transformers.modeling_utils.save_on_cpu = CountedSaveOnCpu


class TokenIds(torch.utils.data.Dataset):
    def __init__(self, rows):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, LLAMA["vocab_size"], (rows, SEQ_LEN), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def run_cell(path, cell, every1, none, tmp):
    budget = None if cell["at"] is None else f"{int(every1 + cell['at'] * (none - every1))}B"
    plan = remat.plan(path, budget=budget, **PLAN_OPTIONS, **cell["plan"])
    export = plan.export("hf")
    fields = json.loads(export)
    exact = "runs the plan exactly" in export.note
    out = {"name": cell["name"], "strategy": plan.strategy, "parameter": plan.parameter,
           "fits": plan.fits, "budget_bytes": plan.budget_bytes, "export": fields,
           "note": export.note, "exact": exact,
           "predicted_peak_bytes": plan.predicted_peak_bytes,
           "host_peak_bytes": plan.json["predicted"].get("host_peak_bytes", 0)}
    if not exact:
        fields = {k: v for k, v in fields.items() if k not in CHECKPOINTING}
    fields = dict(fields, output_dir=os.path.join(tmp, cell["name"]), use_cpu=True,
                  max_steps=STEPS, eval_strategy="no", save_strategy="no",
                  logging_strategy="no", report_to="none", optim="adamw_torch",
                  dataloader_num_workers=0, disable_tqdm=True, seed=0)
    args = transformers.TrainingArguments(**fields)
    fields_in = {"per_device_train_batch_size": args.per_device_train_batch_size,
                 "gradient_accumulation_steps": args.gradient_accumulation_steps}
    out["trainer_sees"] = fields_in
    hf_config = transformers.AutoConfig.for_model(
        "llama", **{k: v for k, v in LLAMA.items() if k not in ("model_type", "architectures")})
    hf_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(hf_config)
    model.config.use_cache = False
    if not exact:
        remat.apply(model, plan)
    rows = args.per_device_train_batch_size * args.gradient_accumulation_steps * STEPS
    trainer = transformers.Trainer(model=model, args=args, train_dataset=TokenIds(rows))
    PACKED.clear()
    with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints its metrics
        m = remat_measure.measure(trainer.train, timeline=False)
    forwards = STEPS * args.gradient_accumulation_steps
    out["block_input_bytes"] = MICRO_BATCH * SEQ_LEN * LLAMA["hidden_size"] * 4  # fp32
    out["offloaded_bytes_per_forward"] = sum(PACKED) // forwards
    out["offloaded_tensors_per_forward"] = sum(1 for b in PACKED if b > 0) / forwards
    out["weights_sha256"] = hashlib.sha256(
        b"".join(p.detach().contiguous().numpy().tobytes() for p in model.parameters())).hexdigest()
    out["measured_peak_bytes"] = m.baseline_bytes + m.peak_bytes
    out["trainer_checkpointing"] = bool(args.gradient_checkpointing)
    # The decoder layers the Trainer's own checkpointing switched on.
    out["trainer_checkpointed_blocks"] = [
        i for i, layer in enumerate(model.model.layers) if getattr(layer, "gradient_checkpointing", False)]
    out["steps"] = trainer.state.global_step
    return out


def main():
    with open(sys.argv[1]) as f:
        cells = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(LLAMA, f)
        every1 = remat.plan(path, budget="1TB", strategy="uniform", every=1,
                            **PLAN_OPTIONS).predicted_peak_bytes
        none = remat.plan(path, budget="1TB", strategy="none", **PLAN_OPTIONS).predicted_peak_bytes
        for cell in cells:
            print(json.dumps(run_cell(path, cell, every1, none, tmp)), flush=True)


if __name__ == "__main__":
    main()
