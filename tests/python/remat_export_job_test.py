"""`planner --export ENGINE` plans the same job as the plan, and its
predicted peak is that of what the engine's printed configuration runs.

- TheUsersFlags: a decoder's config.json (Llama, GQA, vocabulary 64 x the
  hidden size), fp32, micro-batch 4 x 512, default options: at a budget
  halfway between the plain job's every-block and none, the plan chunks the
  loss and hf runs it exactly (gradient_checkpointing off, Liger-Kernel's
  fused linear cross-entropy on, everything else of Liger off), its note
  predicting the plan's peak; at a budget only the chunked loss fits, the
  plan exits 0 and so does the hf export (every block checkpointed, the
  loss chunked); engines without a chunked loss (deepspeed, megatron,
  torchtitan) plan their closest shape without it and say so.
- ExitCodes: over Llama and GPT-2 configs, budgets from the lowest peak to
  the plain job's none, and every engine, the export's exit code is the
  plan's wherever the note says the engine runs the plan exactly; where it
  differs the plan fits, the export does not, and its line says no plan the
  engine can express fits. Every note names the plan it was asked for (the
  same strategy, setting and chunked loss as remat.plan's).
- WhatTheConfigRuns: each hf export's predicted peak (the note's figure)
  equals remat.plan's for the job its fields run: every block
  checkpointed, every n-th from block 0 (every_n_layers) or none
  (gradient_checkpointing), with Liger-Kernel's chunk
  count or the whole loss (use_liger_kernel); and a GPT-2 (which
  Liger-Kernel does not patch) whose plan chunks the loss is exported
  without it, and transformers' Trainer, built from the fields as printed,
  peaks within 3% of the note's prediction on remat's CPU meter
  (tests/python/remat_export_job_cells.py).

Run by CTest (label "python") with PYTHONPATH=build/python plus python/;
the Trainer case skipped, visibly, without torch, transformers, accelerate
or the meter, the TrainingArguments reads without transformers
(tests/python/needs.py).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import needs
import remat

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = ("pytorch", "hf", "deepspeed", "megatron", "torchtitan")
JOB = dict(micro_batch=4, seq_len=512, precision="fp32", device="cpu", attention="sdpa")
LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=128,
             intermediate_size=352, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=8192, max_position_embeddings=1024,
             rms_norm_eps=1e-6, tie_word_embeddings=False)
GPT2 = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=64, n_layer=4,
            n_head=4, vocab_size=4096, n_positions=256, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0)
GPT2_JOB = dict(micro_batch=2, seq_len=128, precision="fp32", device="cpu", attention="eager",
                dropout=0)
NO_FIT = "no plan {} can express fits the budget"


def format_bytes(n):
    """The planner's FormatBytes (planner/src/io/units.cc)."""
    value, unit = float(abs(n)), 0
    while value >= 1024.0 and unit < 6:
        value, unit = value / 1024.0, unit + 1
    sign = "-" if n < 0 else ""
    if unit == 0:
        return f"{sign}{int(value)} B"
    return f"{sign}{value:.2f} {['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'][unit]}"


def hf_shape(fields, blocks):
    """The remat.plan options of what transformers runs for an hf export's
    fields: no checkpointing, every block, or blocks 0, n, 2n, ... (its
    every_n_layers)."""
    if not fields["gradient_checkpointing"]:
        return dict(strategy="none")
    n = fields.get("gradient_checkpointing_kwargs", {}).get("every_n_layers", 1)
    if n == 1:
        return dict(strategy="uniform", every=1)
    return dict(strategy="manual", checkpoint_layers=list(range(0, blocks, n)))


def predicted(note):
    """The figure after 'predicted' in an export's note."""
    match = re.search(r"predicted (\S+ \S+) \(", note)
    assert match, note
    return match.group(1)


class Config:
    def __init__(self, cfg, job):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, cfg["model_type"] + ".config.json")
        with open(self.path, "w") as f:
            json.dump(cfg, f)
        self.job = job

    def plan(self, budget, **options):
        return remat.plan(self.path, budget=budget, **dict(self.job, **options))

    def run(self, budget, extra, **options):
        """(exit code, stdout, stderr) of planner --budget B ... EXTRA."""
        return remat._planner._plan_command(self.path, budget, dict(self.job, **options), extra)

    def export(self, budget, engine, **options):
        code, out, err = self.run(budget, ["--export", engine], **options)
        notes = [l for l in err.splitlines() if l.startswith("planner: export: ")]
        return code, out, notes[0][len("planner: export: "):] if notes else "", err

    def peak(self, budget, **options):
        return self.plan(budget, **options).predicted_peak_bytes

    def close(self):
        self.dir.cleanup()


class Case(unittest.TestCase):
    def setUp(self):
        self.llama = Config(LLAMA, JOB)

    def tearDown(self):
        self.llama.close()

    def liger_chunks(self):
        return self.llama.plan("1TB", strategy="none", chunked_loss="auto").json["job"][
            "loss_chunks"]


class TheUsersFlags(Case):
    def test_halfway_hf_runs_the_chunked_plan_exactly(self):
        every = self.llama.peak("1TB", strategy="uniform", every=1)
        none = self.llama.peak("1TB", strategy="none")
        budget = (every + none) // 2
        plan = self.llama.plan(budget)
        self.assertTrue(plan.fits)
        chunks = plan.json["job"]["loss_chunks"]
        self.assertEqual(chunks, self.liger_chunks())
        code, out, note, err = self.llama.export(budget, "hf")
        self.assertEqual(code, 0, err)
        fields = json.loads(out)
        self.assertIs(fields["gradient_checkpointing"], False)
        self.assertIs(fields["use_liger_kernel"], True)
        self.assertEqual(fields["liger_kernel_config"],
                         {"fused_linear_cross_entropy": True, "cross_entropy": False,
                          "rope": False, "rms_norm": False, "swiglu": False, "geglu": False,
                          "layer_norm": False})
        self.assertIn("hf runs the plan exactly: none, loss in "
                      f"{chunks} chunks (Liger-Kernel's fused linear cross-entropy)", note)
        self.assertEqual(predicted(note), format_bytes(plan.predicted_peak_bytes))
        if not needs.missing("transformers"):  # transformers reads every field back
            import transformers

            args = transformers.TrainingArguments(output_dir=tempfile.gettempdir(),
                                                  use_cpu=True, **fields)
            self.assertTrue(args.use_liger_kernel)
            self.assertEqual(args.liger_kernel_config, fields["liger_kernel_config"])

    def test_where_only_the_chunked_loss_fits_the_export_exits_as_the_plan(self):
        every = self.llama.peak("1TB", strategy="uniform", every=1, chunked_loss="auto")
        plain_lowest = self.llama.peak("1B", strategy="optimal", chunked_loss=0)
        self.assertLess(every, plain_lowest)
        budget = every + 1
        plan = self.llama.plan(budget)
        self.assertTrue(plan.fits)
        self.assertGreater(plan.json["job"]["loss_chunks"], 0)
        code, out, note, err = self.llama.export(budget, "hf")
        self.assertEqual(code, 0, err)
        self.assertIs(json.loads(out)["gradient_checkpointing"], True)
        self.assertIs(json.loads(out)["use_liger_kernel"], True)
        self.assertEqual(predicted(note), format_bytes(every))
        for engine in ("deepspeed", "megatron", "torchtitan"):
            with self.subTest(engine=engine):
                code, out, note, err = self.llama.export(budget, engine)
                self.assertEqual(code, 3, err)
                self.assertIn(f"{engine}'s configuration has no chunked loss", note)
                self.assertIn(NO_FIT.format(engine), err)
                self.assertNotIn("liger", out)
        code, out, note, err = self.llama.export(budget, "pytorch")
        self.assertEqual(code, 0, err)
        self.assertIn("(remat.apply)", note)


class ExitCodes(Case):
    def test_the_export_exits_as_the_plan_where_the_engine_runs_it(self):
        gpt2 = Config(GPT2, GPT2_JOB)
        try:
            for name, config in (("llama", self.llama), ("gpt2", gpt2)):
                low = config.peak("1B", strategy="optimal", chunked_loss="auto")
                high = config.peak("1TB", strategy="none")
                for i in range(9):
                    budget = low + i * (high - low) // 8
                    code, out, err = config.run(budget, ["--format", "json"])
                    plan = json.loads(out)
                    asked = plan["strategy"] + (f" ({plan['parameter']})" if plan["parameter"]
                                                else "")
                    for engine in ENGINES:
                        with self.subTest(model=name, budget=budget, engine=engine):
                            self.check(config, budget, engine, code, plan, asked)
        finally:
            gpt2.close()

    def check(self, config, budget, engine, plan_code, plan, asked):
        code, out, note, err = config.export(budget, engine)
        self.assertIn(code, (0, 3), err)
        chunks = plan["job"].get("loss_chunks", 0)
        if "runs the plan exactly" in note:
            self.assertEqual(code, plan_code, err)
            self.assertIn(asked, note)
        else:
            # The plan asked about, as remat.plan made it, with its loss.
            self.assertIn(f"applies {asked}{f', loss in {chunks} chunks' if chunks else ''} "
                          "exactly", note)
            if code != plan_code:
                self.assertEqual((plan_code, code), (0, 3), err)
                self.assertIn(NO_FIT.format(engine), err)


class WhatTheConfigRuns(Case):
    def test_each_hf_exports_prediction_is_its_fields_job(self):
        low = self.llama.peak("1B", strategy="optimal", chunked_loss="auto")
        high = self.llama.peak("1TB", strategy="none")
        liger = self.liger_chunks()
        for i in range(9):
            budget = low + i * (high - low) // 8
            code, out, note, err = self.llama.export(budget, "hf")
            fields = json.loads(out)
            shape = hf_shape(fields, LLAMA["num_hidden_layers"])
            chunked = fields.get("use_liger_kernel", False)
            with self.subTest(budget=budget, shape=shape, chunked=chunked):
                runs = self.llama.plan(budget, chunked_loss=liger if chunked else 0, **shape)
                self.assertEqual(predicted(note), format_bytes(runs.predicted_peak_bytes))

    @needs.modules("torch", "transformers", "accelerate")
    def test_a_gpt2_trainer_runs_what_the_note_predicts(self):
        needs.skip_without_meter(self)
        gpt2 = Config(GPT2, GPT2_JOB)
        try:
            lowest_chunked = gpt2.peak("1B", strategy="optimal", chunked_loss="auto")
            lowest_plain = gpt2.peak("1B", strategy="optimal", chunked_loss=0)
            none = gpt2.peak("1TB", strategy="none")
            cells = []
            for name, budget in (("chunked-only", (lowest_chunked + lowest_plain) // 2),
                                 ("between", (lowest_plain + none) // 2)):
                plan = gpt2.plan(budget)
                code, out, note, err = gpt2.export(budget, "hf")
                fields = json.loads(out)
                self.assertNotIn("use_liger_kernel", fields)  # Liger-Kernel has no GPT-2
                shape = hf_shape(fields, GPT2["n_layer"])
                runs = gpt2.plan(budget, chunked_loss=0, **shape).predicted_peak_bytes
                self.assertEqual(predicted(note), format_bytes(runs))
                cells.append({"name": name, "fields": fields, "config": GPT2,
                              "seq_len": GPT2_JOB["seq_len"], "predicted_peak_bytes": runs,
                              "plan_chunks": plan.json["job"].get("loss_chunks", 0),
                              "plan_code": 0 if plan.fits else 3, "export_code": code})
            self.assertGreater(cells[0]["plan_chunks"], 0)  # the plan chunks the loss
            harness = os.path.join(HERE, "remat_export_job_cells.py")
            r = subprocess.run([sys.executable, "-W", "ignore", harness, "/dev/stdin"],
                               input=json.dumps(cells), capture_output=True, text=True,
                               timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            results = [json.loads(l) for l in r.stdout.splitlines() if l.startswith('{"name"')]
            self.assertEqual(len(results), len(cells))
            for cell, result in zip(cells, results):
                measured, want = result["measured_peak_bytes"], cell["predicted_peak_bytes"]
                print(f"gpt2 {cell['name']}: plan exit {cell['plan_code']} (loss in "
                      f"{cell['plan_chunks']} chunks), export exit {cell['export_code']}, "
                      f"gradient_checkpointing {cell['fields']['gradient_checkpointing']}, "
                      f"predicted {want:,} B, measured {measured:,} B "
                      f"({(measured - want) / want:+.2%})", file=sys.stderr)
                with self.subTest(cell=cell["name"]):
                    self.assertEqual(result["steps"], 2)
                    self.assertLessEqual(abs(measured - want), 0.03 * want)
        finally:
            gpt2.close()


if __name__ == "__main__":
    unittest.main()
