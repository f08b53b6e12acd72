"""LoRA's trainable parameters on phi3, mixtral, qwen3_moe and gemma2:
remat's analytic model against PEFT's own count.

Each tiny config.json is built by transformers' AutoModelForCausalLM (random
weights on the CPU, a few hundred thousand parameters), wrapped by PEFT's
get_peft_model with LoraConfig(r=4, target_modules=...) and its trainable
parameters counted (get_nb_trainable_parameters, the numbers
print_trainable_parameters prints); `planner plan --json` with the same
--lora-rank and --lora-targets must report the same model.trainable_parameters.
The targets are each family's module names as PEFT takes them: Phi-3's fused
qkv_proj and gate_up_proj, Mixtral's experts w1, w3, w2 and the router
(PEFT's "gate"), Qwen3-MoE's experts gate_proj, up_proj, down_proj; PEFT
adapts the experts' stacked parameters (target_parameters), the fused
gate_up_proj with twice the rank. Run by CTest (label "python") with PLANNER
set; skipped, visibly, where transformers or peft is not importable.
"""
import json
import os
import subprocess
import tempfile
import unittest
import warnings

import needs

PLANNER = os.environ.get("PLANNER", "")
RANK = 4

if not needs.missing("torch", "transformers", "peft"):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

TINY = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "pad_token_id": 0,
        "bos_token_id": 1, "eos_token_id": 1}
CONFIGS = {
    "phi3": {"model_type": "phi3", "architectures": ["Phi3ForCausalLM"]},
    "mixtral": {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"],
                "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
                  "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "head_dim": 16},
    "gemma2": {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "head_dim": 16},
}
# (family, PEFT's target_modules, remat's --lora-targets)
CASES = [
    ("phi3", "all-linear", "all-linear"),
    ("phi3", ["qkv_proj"], "qkv_proj"),
    ("phi3", ["gate_up_proj", "o_proj"], "gate_up_proj,o_proj"),
    ("mixtral", "all-linear", "all-linear"),
    ("mixtral", ["q_proj", "v_proj"], "q_proj,v_proj"),
    ("mixtral", ["w1", "w3", "w2"], "w1,w3,w2"),
    ("mixtral", ["gate"], "router"),
    ("mixtral", ["w2", "o_proj"], "w2,o_proj"),
    ("qwen3_moe", "all-linear", "all-linear"),
    ("qwen3_moe", ["gate_proj", "up_proj"], "gate_proj,up_proj"),
    ("qwen3_moe", ["down_proj", "gate", "k_proj"], "down_proj,router,k_proj"),
    ("gemma2", "all-linear", "all-linear"),
    ("gemma2", ["gate_proj", "down_proj"], "gate_proj,down_proj"),
]


def config_of(family):
    return {**TINY, **CONFIGS[family]}


def peft_count(family, targets):
    fields = config_of(family)
    fields.pop("architectures")
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peft_model = get_peft_model(model, LoraConfig(r=RANK, target_modules=targets))
    trainable, _ = peft_model.get_nb_trainable_parameters()
    return trainable


def remat_count(family, targets):
    with tempfile.TemporaryDirectory() as d:
        path, out = os.path.join(d, "config.json"), os.path.join(d, "plan.json")
        with open(path, "w") as f:
            json.dump(config_of(family), f)
        r = subprocess.run([PLANNER, path, "--seq-len", "16", "--budget", "80GB",
                            "--lora-rank", str(RANK), "--lora-targets", targets, "--json",
                            "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"planner exited {r.returncode}: {r.stderr.strip()}")
        with open(out) as f:
            return json.load(f)["model"]["trainable_parameters"]


@needs.modules("torch", "transformers", "peft")
@unittest.skipIf(not PLANNER, "PLANNER (the planner executable) is not set")
class TrainableParameters(unittest.TestCase):
    def test_equal_to_peft(self):
        for family, peft_targets, remat_targets in CASES:
            with self.subTest(family=family, targets=remat_targets):
                self.assertEqual(remat_count(family, remat_targets),
                                 peft_count(family, peft_targets))

    def test_one_of_the_fused_experts_gate_and_up_is_refused_as_peft_refuses_it(self):
        with self.assertRaises(ValueError):
            peft_count("mixtral", ["w1"])
        with self.assertRaisesRegex(AssertionError, "exited 2: .*gate_up_proj"):
            remat_count("mixtral", "w1")


if __name__ == "__main__":
    unittest.main()
