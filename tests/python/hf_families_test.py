"""Parameter counts of gemma2, gemma3, qwen3, phi3, mixtral and qwen3_moe
config.json: remat's analytic model against transformers' own.

Each published config in examples/hf is built by transformers'
AutoModelForCausalLM on the meta device (no weights are allocated) and its
parameters summed (model.parameters() yields a tied weight once); `planner
profile --analytic` must report the same number. Run by CTest (label
"python") with PLANNER set; skipped, visibly, where transformers is not
importable.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import needs

SOURCE = os.environ.get("REMAT_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
PLANNER = os.environ.get("PLANNER", "")
MODELS = os.path.join(SOURCE, "examples", "hf")
CONFIGS = ["gemma-2-2b", "gemma-3-1b", "qwen3-8b", "phi-3-mini-4k", "mixtral-8x7b",
           "qwen3-30b-a3b"]

if not needs.missing("torch", "transformers"):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM


def transformers_count(path):
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(path, os.path.join(d, "config.json"))
        config = AutoConfig.from_pretrained(d)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def remat_count(path):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "profile.json")
        r = subprocess.run([PLANNER, "profile", "--analytic", "--seq-len", "64", "-o", out,
                            path], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"planner exited {r.returncode}: {r.stderr.strip()}")
        with open(out) as f:
            return json.load(f)["parameters"]


@needs.modules("torch", "transformers")
@unittest.skipIf(not PLANNER, "PLANNER (the planner executable) is not set")
class ParameterCounts(unittest.TestCase):
    def test_equal_to_transformers(self):
        for name in CONFIGS:
            path = os.path.join(MODELS, name + ".config.json")
            with self.subTest(model=name):
                self.assertEqual(remat_count(path), transformers_count(path))


if __name__ == "__main__":
    unittest.main()
