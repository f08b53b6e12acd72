"""The optimizer state the planner counts (remat.plan's JSON: the profile's
static.optimizer_bytes) against what each optimizer allocates: a
small Hugging Face Llama (untied head, grouped-query attention: matrices of
4,096 elements and more and of fewer, a vocabulary whose embedding is not a
whole number of 256-element blocks) and GPT-2 (tied embeddings, biases,
Conv1D weights) built from their config.json in fp32 on the CPU, one
backward and one optimizer step, then the bytes of every tensor in the
optimizer's state (a tensor shared by several parameters once: bitsandbytes'
quantization maps). Exactly equal:
  - torch.optim.Adafactor: the factored second moment of each matrix, the
    full one of each vector, a step counter each;
  - torch.optim.Muon over the 2-D parameters and torch.optim.AdamW over
    the others (--optimizer muon);
  - bitsandbytes' AdamW8bit (optimizer_8bit_test.py, a file of its own:
    it skips without bitsandbytes).
And an unknown --optimizer is refused with exit 2, naming those accepted.

Run by CTest (python_optimizer_state, label "python") with PLANNER set to
the build's `planner`.
"""
import json
import os
import subprocess
import tempfile
import unittest

import needs
import remat

torch = needs.optional("torch")
PLANNER = os.environ.get("PLANNER", "")

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1003, "max_position_embeddings": 256,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "float32"}
GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_head": 4,
        "n_layer": 2, "n_positions": 128, "vocab_size": 1003, "bos_token_id": 0,
        "eos_token_id": 0, "torch_dtype": "float32"}
SEQ_LEN, MICRO_BATCH = 32, 2


def state_bytes(optimizers):
    seen, total = set(), 0
    for o in optimizers:
        for state in o.state.values():
            for value in state.values():
                if torch.is_tensor(value) and value.data_ptr() not in seen:
                    seen.add(value.data_ptr())
                    total += value.numel() * value.element_size()
    return total


def make_optimizers(name, parameters):
    parameters = list(parameters)
    if name == "adafactor":
        return [torch.optim.Adafactor(parameters, lr=1e-3)]
    if name == "muon":
        return [torch.optim.Muon([p for p in parameters if p.ndim == 2], lr=1e-3),
                torch.optim.AdamW([p for p in parameters if p.ndim != 2], lr=1e-3)]
    if name == "adamw8bit":
        import bitsandbytes
        return [bitsandbytes.optim.AdamW8bit(parameters, lr=1e-3)]
    raise ValueError(name)


def planned_bytes(config, optimizer):
    """The plan's optimizer state for the model of `config` in fp32 under
    --optimizer `optimizer`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(dict(config, remat={"precision": "fp32", "optimizer": optimizer,
                                          "seq_len": SEQ_LEN, "micro_batch": MICRO_BATCH,
                                          "dropout": 0}), f)
        plan = remat.plan(path, budget="1TB", device="cpu", strategy="none")
    return plan.json["profile"]["static"]["optimizer_bytes"]


def stepped_model(config):
    """The fp32 model of `config` on the CPU and its loss on one random
    micro-batch (not yet backpropagated)."""
    import transformers
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(**{k: v for k, v in config.items()
                                             if k != "architectures"}))
    ids = torch.randint(0, config["vocab_size"], (MICRO_BATCH, SEQ_LEN))
    return model, model(input_ids=ids, labels=ids).loss


def measured_and_planned(config, optimizer):
    """The bytes of `optimizer`'s state after one step of the model of
    `config`, and the plan's optimizer state for it."""
    planned = planned_bytes(config, optimizer)
    model, loss = stepped_model(config)
    loss.backward()
    optimizers = make_optimizers(optimizer, model.parameters())
    for o in optimizers:
        o.step()
    return state_bytes(optimizers), planned


def check(test, optimizer):
    """Asserts `optimizer`'s state equals the plan's on both models."""
    for name, config in (("llama", LLAMA), ("gpt2", GPT2)):
        with test.subTest(model=name):
            measured, planned = measured_and_planned(config, optimizer)
            print(f"{optimizer} {name}: state {measured:,} B, planned {planned:,} B")
            test.assertEqual(measured, planned)


@needs.modules("torch", "transformers")
class OptimizerState(unittest.TestCase):
    def test_adafactor(self):
        check(self, "adafactor")

    def test_muon_with_adamw_on_the_vectors(self):
        check(self, "muon")


class UnknownOptimizer(unittest.TestCase):
    def test_refused_naming_the_accepted(self):
        source = os.environ.get("REMAT_SOURCE_DIR",
                                os.path.join(os.path.dirname(__file__), "..", ".."))
        r = subprocess.run([PLANNER, "--budget", "24GB", "--optimizer", "lion",
                            os.path.join(source, "examples", "gpt2-small.json")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        for name in ("adamw", "adafactor", "muon", "adamw8bit"):
            self.assertIn(name, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main()
