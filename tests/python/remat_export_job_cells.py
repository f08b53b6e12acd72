"""An hf export's TrainingArguments fields as printed, run: transformers'
Trainer trains the causal LM built from a config.json (random weights, fp32
on CPU) for two steps on random token ids, metered by remat's CPU meter
(python/remat_measure) over the whole trainer.train() call: the process's
bytes in use before it (weights, the token ids) plus its peak (AdamW's
moments, made by the first step, live all through the second). Beside the
export's fields: max_steps 2, no evaluation, saving or logging, torch's
AdamW, a temporary output_dir, use_cpu.

A cell is {"name", "fields" (the export's), "config" (config.json fields),
"seq_len"}. Prints one JSON line per cell: measured_peak_bytes, steps.

usage: remat_export_job_cells.py CELLS.json
"""
import contextlib
import json
import os
import sys
import tempfile

import remat_measure

remat_measure.load()  # before torch allocates anything
import torch  # noqa: E402
import transformers  # noqa: E402


class TokenIds(torch.utils.data.Dataset):
    def __init__(self, rows, seq_len, vocab):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (rows, seq_len), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def run_cell(cell, tmp):
    cfg = cell["config"]
    fields = dict(cell["fields"], output_dir=os.path.join(tmp, cell["name"]), use_cpu=True,
                  max_steps=2, eval_strategy="no", save_strategy="no", logging_strategy="no",
                  report_to="none", optim="adamw_torch", dataloader_num_workers=0,
                  disable_tqdm=True, seed=0)
    args = transformers.TrainingArguments(**fields)
    config = transformers.AutoConfig.for_model(
        cfg["model_type"], **{k: v for k, v in cfg.items() if k not in ("model_type", "architectures")})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.config.use_cache = False
    rows = args.per_device_train_batch_size * args.gradient_accumulation_steps * 2
    data = TokenIds(rows, cell["seq_len"], cfg["vocab_size"])
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints its metrics
        m = remat_measure.measure(trainer.train, timeline=False)
    return {"name": cell["name"], "measured_peak_bytes": m.baseline_bytes + m.peak_bytes,
            "steps": trainer.state.global_step}


def main():
    with open(sys.argv[1]) as f:
        cells = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for cell in cells:
            print(json.dumps(run_cell(cell, tmp)), flush=True)


if __name__ == "__main__":
    main()
