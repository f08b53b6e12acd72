"""python/remat: remat.plan / remat.pareto, the planner library in process.

Run by CTest (label "python") with PYTHONPATH=build/python (the package as
pip installs it: the sources beside the built extension) and PLANNER set to
the build's `planner` executable: the package and the command are two faces
of one library, so their outputs must be the same bytes.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import remat

SOURCE = os.environ.get("REMAT_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
PLANNER = os.environ["PLANNER"]
GPT2 = os.path.join(SOURCE, "examples", "gpt2-small.json")
LLAMA = os.path.join(SOURCE, "examples", "hf", "llama-3.2-1b.config.json")


def command(*args):
    r = subprocess.run([PLANNER, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


class Plan(unittest.TestCase):
    def test_plans_without_pytorch(self):
        # pip install . into an environment without PyTorch plans: importing
        # remat imports no module that needs torch (remat.trace, remat.apply
        # and remat.profile import it when called). torch is made missing
        # in a child Python.
        code = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
import remat
plan = remat.plan(sys.argv[1], budget="24GB")
print(plan.fits, "torch" in sys.modules)
"""
        r = subprocess.run([sys.executable, "-c", code, GPT2], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["True", "False"])

    def test_the_plan_is_the_commands_json(self):
        plan = remat.plan(GPT2, budget="24GB", strategy="optimal", micro_batch=8)
        code, out, _ = command("--budget", "24GB", "--strategy", "optimal", "--micro-batch", "8",
                               "--format", "json", "--quiet", GPT2)
        self.assertEqual(code, 0)
        self.assertEqual(plan.json, json.loads(out))
        self.assertTrue(plan.fits)
        self.assertEqual(plan.micro_batch, 8)
        self.assertEqual(plan.predicted_peak_bytes, json.loads(out)["predicted"]["peak_bytes"])
        self.assertLessEqual(plan.predicted_peak_bytes, 24_000_000_000)
        self.assertEqual(len(plan.layers), len(plan.json["profile"]["layers"]))

    def test_list_options_and_config_json(self):
        plan = remat.plan(LLAMA, budget="80GiB", checkpoint_layers=[0, 4, 8], seq_len=1024,
                          micro_batch=2, precision="amp_bf16")
        self.assertEqual(plan.strategy, "manual")
        checkpointed = [l["name"] for l in plan.layers if l["decision"] == "checkpoint"]
        self.assertEqual(len(checkpointed), 3)

    def test_a_dict_plans_as_its_file(self):
        with open(GPT2) as f:
            model = json.load(f)
        self.assertEqual(remat.plan(model, budget="24GB").predicted_peak_bytes,
                         remat.plan(GPT2, budget="24GB").predicted_peak_bytes)

    def test_bad_input_raises_the_commands_line(self):
        code, _, err = command("--budget", "24XB", GPT2)
        self.assertEqual(code, 2)
        with self.assertRaises(remat.InputError) as raised:
            remat.plan(GPT2, budget="24XB")
        self.assertEqual(raised.exception.exit_code, 2)
        self.assertEqual("planner: error: " + raised.exception.message, err.strip())
        self.assertIsInstance(raised.exception, ValueError)

    def test_an_unknown_option_is_bad_input(self):
        with self.assertRaises(remat.InputError) as raised:
            remat.plan(GPT2, budget="24GB", no_such_option=3)
        self.assertIn("--no-such-option", raised.exception.message)

    def test_a_missing_file_is_bad_input(self):
        with self.assertRaises(remat.InputError):
            remat.plan(os.path.join(SOURCE, "no-such-model.json"), budget="24GB")

    def test_no_fit_is_a_plan_that_says_what_would(self):
        plan = remat.plan(GPT2, budget="6GB", chunked_loss=0)
        code, out, err = command("--budget", "6GB", "--chunked-loss", "0", "--format", "json", "--quiet", GPT2)
        self.assertEqual(code, 3)
        self.assertFalse(plan.fits)
        self.assertEqual(plan.json, json.loads(out))
        self.assertEqual("planner: " + plan.message, err.strip())

    def test_alternatives_are_what_the_command_plans_with_their_flags(self):
        # Llama-3.2-1B's amp AdamW state (16 B a parameter) is above 8 GB.
        plan = remat.plan(LLAMA, budget="8GB", seq_len=512)
        self.assertFalse(plan.fits)
        self.assertEqual(plan.alternatives, plan.json["fit_advice"]["alternatives"])
        self.assertTrue(plan.alternatives)
        fastest = plan.alternatives[0]
        code, out, _ = command("--budget", "8GB", "--seq-len", "512", "--format", "json", "--quiet",
                               *fastest["flags"].split(), LLAMA)
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(out)["predicted"]["peak_bytes"], fastest["peak_bytes"])
        # A plan that fits has none.
        self.assertEqual(remat.plan(LLAMA, budget="80GB", seq_len=512).alternatives, [])

    def test_parallel_options_plan_every_rank(self):
        plan = remat.plan(GPT2, budget="24GB", gpus=8, fsdp="full_shard", global_batch=256)
        self.assertEqual(plan.json["job"]["parallel"]["data"], "fsdp2")
        ranks = plan.json["predicted"]["per_rank"]
        self.assertEqual([(r["rank"], r["ranks"]) for r in ranks], [(0, 8)])
        self.assertEqual(plan.micro_batch * plan.grad_accumulation * 8, 256)
        with self.assertRaises(remat.InputError) as raised:
            remat.plan(GPT2, budget="24GB", gpus=8, zero=2, fsdp="full_shard")
        self.assertIn("--ddp, --zero and --fsdp", raised.exception.message)

    def test_save_writes_a_plan_that_train_reads_back(self):
        plan = remat.plan(GPT2, budget="24GB")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.json")
            plan.save(path)
            with open(path) as f:
                self.assertEqual(json.load(f), plan.json)
            self.assertEqual(os.listdir(d), ["plan.json"])  # no temporary left


class Pareto(unittest.TestCase):
    def test_the_curve_is_the_commands(self):
        curve = remat.pareto(GPT2, points=4)
        code, out, _ = command("pareto", "--json", "--quiet", "--points", "4", GPT2)
        self.assertEqual(code, 0)
        self.assertEqual(curve.json, json.loads(out))
        self.assertTrue(curve.points)


if __name__ == "__main__":
    unittest.main()
