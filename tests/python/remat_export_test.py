"""Plan.export(engine): what a training engine takes for a plan, fed to the
engines' own configuration classes where they are installed.

Run by CTest (label "python") like remat_plan_test: PYTHONPATH=build/python
and PLANNER the build's `planner`. transformers' TrainingArguments and
DeepSpeed's DeepSpeedConfig are skipped, visibly, where not importable.
"""
import json
import os
import subprocess
import tempfile
import unittest

import remat

SOURCE = os.environ.get("REMAT_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
PLANNER = os.environ["PLANNER"]
GPT2 = os.path.join(SOURCE, "examples", "gpt2-small.json")

try:
    import transformers
except ImportError:
    transformers = None
try:
    import deepspeed.runtime.config as deepspeed_config
except ImportError:
    deepspeed_config = None


def command(*args):
    r = subprocess.run([PLANNER, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


class Export(unittest.TestCase):
    def test_export_is_the_commands_output(self):
        plan = remat.plan(GPT2, budget="24GB", checkpoint_layers=[0, 4, 8], micro_batch=4)
        for engine in ("pytorch", "hf", "deepspeed", "megatron", "torchtitan"):
            exported = plan.export(engine)
            code, out, err = command("--budget", "24GB", "--export", engine, "--quiet",
                                     "--checkpoint-layers", "0,4,8", "--micro-batch", "4", GPT2)
            self.assertEqual(code, 0, err)
            self.assertEqual(exported, out)
            self.assertEqual(exported.engine, engine)
            self.assertIn(exported.note, err)
        self.assertIn("cannot express manual (blocks 0,4,8)", plan.export("hf").note)

    def test_unknown_engine_is_input_error(self):
        plan = remat.plan(GPT2, budget="24GB")
        with self.assertRaises(remat.InputError) as e:
            plan.export("colossal")
        self.assertIn("pytorch, hf, deepspeed, megatron, torchtitan", str(e.exception))

    def test_a_plan_not_made_by_remat_plan_cannot_export(self):
        plan = remat.plan(GPT2, budget="24GB")
        with self.assertRaises(ValueError):
            remat.Plan(plan.json).export("hf")

    @unittest.skipIf(transformers is None, "transformers is not installed")
    def test_hf_fields_are_training_arguments(self):
        for options in ({"every": 1}, {"strategy": "none", "micro_batch": 2},
                        {"checkpoint_layers": [0, 4, 8]}, {"precision": "amp_fp16"},
                        {"precision": "fp32", "grad_accumulation": 4}):
            fields = json.loads(remat.plan(GPT2, budget="24GB", **options).export("hf"))
            with tempfile.TemporaryDirectory() as tmp:
                # use_cpu: transformers refuses bf16 where no device has it;
                # the fields are what is checked here, on any machine.
                args = transformers.TrainingArguments(output_dir=tmp, use_cpu=True, **fields)
            for name, value in fields.items():
                self.assertEqual(getattr(args, name), value, name)
        self.assertTrue(fields.get("bf16") is None and fields.get("fp16") is None)
        self.assertEqual(fields["gradient_accumulation_steps"], 4)

    @unittest.skipIf(deepspeed_config is None, "deepspeed is not installed")
    def test_deepspeed_config_is_accepted(self):
        config = json.loads(remat.plan(GPT2, budget="24GB", every=4).export("deepspeed"))
        config["train_batch_size"] = (config["train_micro_batch_size_per_gpu"] *
                                      config["gradient_accumulation_steps"])
        ds = deepspeed_config.DeepSpeedConfig(config)
        self.assertEqual(ds.train_micro_batch_size_per_gpu,
                         config["train_micro_batch_size_per_gpu"])


if __name__ == "__main__":
    unittest.main()
