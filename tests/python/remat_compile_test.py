"""remat.apply under torch.compile (inductor, CPU): every kind of plan
remat.apply carries out (none, uniform, two-block segments, selective,
optimal, the chunked loss on the Llama), applied, then the model compiled whole or block by block (as
torchtitan compiles: torch.compile(block, fullgraph=True) registered in the
block list), gives eager's gradients.

Run by CTest (label "python"); skipped, visibly, where torch or
transformers is missing. Models are tiny (4 blocks, hidden 64, vocab 256,
fp32, dropout 0): a Hugging Face Llama with GQA (4 query heads, 2 KV
heads, sdpa) and a GPT-2. Each case compiles once (TORCHINDUCTOR_CACHE_DIR,
set by CTest to the build tree, keeps the compiled kernels for the next
run).

The tolerance: inductor fuses and reorders fp32 arithmetic, so compiled and
eager gradients differ by rounding. Each gradient is a chain of sums of at
most K terms (K the longest reduction of the step: the vocabulary, the
tokens, the MLP's width), forward and backward, so each differs from the
exact value by at most about 2 K u max|g| (u = 2^-24, fp32's unit
roundoff). Both the eager fp32 gradients and the compiled ones are checked
against a float64 eager reference with that bound; a plan carried out
wrongly (a block skipped, a segment's output dropped) is off by O(max|g|).
"""
import json
import os
import tempfile
import unittest

import needs
import remat

if needs.missing("torch", "transformers"):
    torch = transformers = None
else:
    import torch
    import transformers

MICRO_BATCH, SEQ_LEN = 2, 32
LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
             intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256, max_position_embeddings=128,
             rms_norm_eps=1e-6, tie_word_embeddings=False)
GPT2 = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_embd=64, n_layer=4, n_head=4,
            vocab_size=256, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=0, eos_token_id=0)
UNIT_ROUNDOFF = 2.0 ** -24


def hf_model(cfg, dtype):
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    config._attn_implementation = "sdpa"
    config.use_cache = False  # training: no KV cache
    torch.manual_seed(0)
    return getattr(transformers, cfg["architectures"][0])(config).to(dtype).train()


class Compiled:
    """One model (a unittest.TestCase mixin); each test applies one plan, compiles one way, runs one
    step and compares the gradients with the float64 reference."""
    config = LLAMA
    blocks_path = "model.layers"
    reduction = max(256, MICRO_BATCH * SEQ_LEN, 128)  # vocabulary, tokens, MLP width

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "config.json")
        with open(cls.path, "w") as f:
            json.dump(cls.config, f)
        cls.model = hf_model(cls.config, torch.float32)
        cls.named = list(cls.model.named_parameters())
        torch.manual_seed(1)
        cls.ids = torch.randint(0, cls.config["vocab_size"], (MICRO_BATCH, SEQ_LEN))
        reference = hf_model(cls.config, torch.float64)
        reference.load_state_dict({k: v.double() for k, v in cls.model.state_dict().items()})
        cls.reference = cls.step(reference, list(reference.named_parameters()))
        cls.eager = cls.step(cls.model, cls.named)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    @classmethod
    def step(cls, model, named):
        for _, p in named:
            p.grad = None
        loss = model(input_ids=cls.ids, labels=cls.ids).loss
        loss.backward()
        return {n: p.grad.double() for n, p in named}

    def plan(self, strategy, budget="1GB", **options):
        return remat.plan(self.path, budget=budget, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                          precision="fp32", device="cpu", attention="sdpa", strategy=strategy,
                          **options)

    def plans(self, name):
        if name == "selective":  # the selective strategy's lowest peak: every block selective
            lowest = self.plan("selective", "1B").predicted_peak_bytes
            return self.plan("selective", f"{lowest}B")
        if name == "segment":  # two segments of two blocks
            return self.plan("segment", segments=2)
        if name == "optimal":  # the optimal strategy's lowest peak: its every construct
            lowest = self.plan("optimal", "1B").predicted_peak_bytes
            return self.plan("optimal", f"{lowest}B")
        if name == "chunked":
            return self.plan("uniform", chunked_loss=4)
        return self.plan(name)

    def assert_close(self, grads, what):
        for name, want in self.reference.items():
            bound = 2 * self.reduction * UNIT_ROUNDOFF * want.abs().max().item()
            err = (grads[name] - want).abs().max().item()
            self.assertLessEqual(err, bound, f"{what}: {name} off by {err:.3g} (bound {bound:.3g})")

    def test_eager_gradients_are_within_the_bound(self):
        self.assert_close(self.eager, "eager fp32")

    def run_compiled(self, plan_name, mode):
        from torch._dynamo.utils import counters

        plan = self.plans(plan_name)
        decisions = {l["decision"] for l in plan.layers}
        if plan_name not in ("none", "chunked"):
            self.assertTrue(decisions - {"keep"}, plan.layers)
        if plan_name == "selective":
            self.assertEqual(decisions & {"selective", "checkpoint"}, {"selective"})
        if plan_name == "segment":
            self.assertEqual([l["decision"] for l in plan.layers if l["kind"] == "block"],
                             ["checkpoint", "recompute", "checkpoint", "recompute"])
        if plan_name == "chunked":
            self.assertEqual(plan.json["job"]["loss_chunks"], 4)
        blocks = self.model.get_submodule(self.blocks_path)
        originals = list(blocks)
        torch._dynamo.reset()
        counters.clear()
        remat.apply(self.model, plan)
        try:
            if mode == "whole":
                step = torch.compile(self.model)
            else:  # torchtitan's apply_compile
                for i, block in enumerate(originals):
                    blocks.register_module(str(i), torch.compile(block, fullgraph=True))
                step = self.model
            grads = self.step(step, self.named)
        finally:
            for i, block in enumerate(originals):
                blocks.register_module(str(i), block)
            remat.unapply(self.model)
        breaks = sum(counters["graph_break"].values())
        self.assertGreater(counters["stats"]["unique_graphs"], 0, "nothing was compiled")
        self.assert_close(grads, f"{plan_name} compiled {mode}")
        return breaks

    plain_breaks = None  # the graph breaks of the model compiled whole without a plan

    def check(self, plan_name, mode):
        if mode == "whole" and plan_name != "none" and type(self).plain_breaks is None:
            self.check("none", "whole")
        breaks = self.run_compiled(plan_name, mode)
        if mode == "blocks":  # fullgraph: a break would have raised
            self.assertEqual(breaks, 0)
        elif plan_name == "none":
            type(self).plain_breaks = breaks
        elif plan_name != "chunked":  # the chunked loss's autograd Function breaks the graph
            self.assertLessEqual(breaks, type(self).plain_breaks,
                                 f"{plan_name}, compiled whole: graph breaks the model has not")

    def test_blocks_compiled_before_apply_are_refused(self):
        blocks = self.model.get_submodule(self.blocks_path)
        originals = list(blocks)
        try:
            for i, block in enumerate(originals):
                blocks.register_module(str(i), torch.compile(block, fullgraph=True))
            with self.assertRaises(remat.InputError) as refused:
                remat.apply(self.model, self.plans("uniform"))
        finally:
            for i, block in enumerate(originals):
                blocks.register_module(str(i), block)
        message = str(refused.exception)
        self.assertNotIn("\n", message)
        self.assertIn("compiled before apply", message)
        self.assertIn("call remat.apply(model, plan) first", message)


def with_cases(cases):
    """A test method per (plan, mode) of `cases`, or of every plan and mode
    under REMAT_COMPILE_MATRIX=full."""
    def add(cls):
        plans = ["none", "uniform", "segment", "selective", "optimal"] + cls.extra_plans
        chosen = ([(p, m) for p in plans for m in ("whole", "blocks")]
                  if os.environ.get("REMAT_COMPILE_MATRIX") == "full" else cases)
        for plan_name, mode in chosen:
            setattr(cls, f"test_{plan_name}_{mode}",
                    lambda self, p=plan_name, m=mode: self.check(p, m))
        return cls
    return add


# CTest's cases: each construct compiled once, the two modes alternating
# (a compile of these tiny models takes 20-50 s of one core here, most of it
# dynamo and AOTAutograd); REMAT_COMPILE_MATRIX=full compiles every plan
# both ways (26 cases).
@needs.modules("torch", "transformers")
@with_cases([("none", "whole"), ("uniform", "blocks"), ("segment", "whole"),
             ("selective", "blocks"), ("optimal", "whole"), ("chunked", "blocks")])
class Llama(Compiled, unittest.TestCase):
    config = LLAMA
    blocks_path = "model.layers"
    # The chunked loss: remat.apply carries it out on transformers causal LMs
    # whose loss is ForCausalLM's (GPT-2's head is refused, compiled or not).
    extra_plans = ["chunked"]


@needs.modules("torch", "transformers")
@with_cases([("optimal", "blocks")])
class GPT2(Compiled, unittest.TestCase):
    config = GPT2
    blocks_path = "transformer.h"
    reduction = max(256, MICRO_BATCH * SEQ_LEN, 4 * 64)
    extra_plans = []


if __name__ == "__main__":
    unittest.main()
