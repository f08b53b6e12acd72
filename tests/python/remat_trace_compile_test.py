"""remat.trace(..., compile=True) against the real compiled blocks (inductor,
CPU) of the tiny Llama with GQA and the GPT-2 of bench/compile
(tiny_models.py: 4 blocks, hidden 64, vocabulary 256, 2 x 32 tokens, sdpa,
fp32, dropout 0).

Saved tensors: each block compiled as torchtitan compiles it
(torch.compile(block, fullgraph=True), static shapes) runs one step, and
inductor's own partition function is wrapped to read each partition it
makes (the forward graph's outputs the backward gets, read by
_trace_compile.saved_tensors). The trace, which partitions each distinct
block on fake tensors, must give each block exactly those bytes and
shapes; a checkpointed block (remat.apply's uniform plan) compiled the
same way must keep nothing but its input, as the planner models it.

The selective option attention_core, as remat.apply's compiled policy
tags the block, must keep what inductor partitions for the real compiled
block under remat.apply's selective plan.

Peaks: remat_compile_peak.py (one process per cell, the meter loaded
first) plans with compile=True (none, uniform: every block
checkpointed, selective: attention_core on every block, optimal: at a
budget between uniform's and none's, some blocks checkpointed), applies
the plan, compiles the model whole and meters the third AdamW step; the
measured peak must be within 3% of the prediction and at or below the
plan's budget, and the first step's gradients within fp32's rounding
bound of a float64 eager step, for the Llama and the GPT-2. The cells share one trace
cache (the trace does not depend on the plan). 3% is the project's
stated bar, not a bound derived from the mechanism: what the compiled
trace models (the blocks' saved tensors, exact as the cases above show,
and the buffers inductor plans for each block's backward, kept,
checkpointed and selective) is inductor's own figure; the forward
workspaces and the layers outside the blocks are eager's, and the
gradient of the logits the compiled backward holds while it runs is not
modelled (docs/compile.md).

Run by CTest (label "python"); skipped, visibly, where torch or
transformers is missing (the peaks also where remat's CPU meter is not
built). TORCHINDUCTOR_CACHE_DIR (CTest's, shared with
remat_compile_test) keeps the compiled kernels for the next run;
AOTAutograd's cache is off here, so that each compile partitions.
"""
import os
import sys
import tempfile
import unittest

import compiled_cell
import needs
import remat

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "compile"))

if needs.missing("torch", "transformers"):
    torch = None
else:
    import torch
    from tiny_models import BLOCKS, MICRO_BATCH, MODELS, SEQ_LEN, build, lowest_plan, \
        plan_options, write_config


def compiled_partitions(name, plan=None, count=None):
    """[(bytes, [shapes])] of each partition inductor makes while the
    model's blocks, each compiled alone (after remat.apply(plan) when
    given; the first `count` blocks, all without it), run one training
    step."""
    import torch._inductor.compile_fx as compile_fx
    from remat._trace_compile import saved_tensors

    found = []
    original = compile_fx.partition_fn

    def recording(joint, joint_inputs, **options):
        fw, bw = original(joint, joint_inputs, **options)
        saved = saved_tensors(fw, bw)
        found.append((sum(b for _, _, b in saved), sorted(list(s) for _, s, _ in saved)))
        return fw, bw

    model = build(name)
    if plan is not None:
        remat.apply(model, plan)
    blocks = model.get_submodule(BLOCKS[name])
    originals = list(blocks)
    torch._dynamo.reset()
    compile_fx.partition_fn = recording
    try:
        # AOTAutograd's cache would hand back a partition made before
        # without partitioning; inductor's own cache still keeps the kernels.
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False), \
                torch._functorch.config.patch(enable_autograd_cache=False):
            for i, block in enumerate(originals[:count]):
                blocks.register_module(str(i), torch.compile(block, fullgraph=True))
            ids = torch.randint(0, MODELS[name]["vocab_size"], (MICRO_BATCH, SEQ_LEN))
            model(input_ids=ids, labels=ids).loss.backward()
    finally:
        compile_fx.partition_fn = original
        for i, block in enumerate(originals):
            blocks.register_module(str(i), block)
        torch._dynamo.reset()
    return found


@unittest.skipIf(torch is None, needs.SKIPPED)
class TracedSavedTensors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def traced_blocks(self, name):
        path = write_config(name, self.dir.name)
        profile = remat.trace(path, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu",
                              compile=True)
        self.assertTrue(profile.json["trace"]["compile"], "the profile says it is compiled")
        return [l for l in profile.json["layers"] if l["kind"] == "block"], profile

    def check(self, name):
        blocks, profile = self.traced_blocks(name)
        real = compiled_partitions(name)
        # Blocks of one class with inputs of one shape compile once.
        self.assertEqual(len(real), 1, real)
        want_bytes, want_shapes = real[0]
        self.assertGreater(want_bytes, 0)
        for layer in blocks:
            self.assertEqual(layer["saved_bytes"], want_bytes, layer["name"])
        traced = profile.json["trace"]["compile"]["blocks"]
        self.assertEqual([b["saved_shapes"] for b in traced], [want_shapes])
        # A checkpointed block, compiled, keeps its input only.
        options = plan_options()
        uniform = remat.plan(write_config(name, self.dir.name), budget="1GB", strategy="uniform",
                             **options)
        self.assertEqual({l["decision"] for l in uniform.layers if l["kind"] == "block"},
                         {"checkpoint"})
        # (The first block compiled alone: the blocks are alike.)
        for saved_bytes, shapes in compiled_partitions(name, uniform, count=1):
            self.assertEqual(saved_bytes, 0, shapes)
        # Under remat.apply's selective plan (attention_core on the blocks;
        # at its lowest peak the last block may stay whole, the peak lying
        # elsewhere) the first block, compiled, keeps what the trace's
        # option keeps.
        selective = lowest_plan(write_config(name, self.dir.name), "selective", **options)
        chosen = [(l["decision"], l.get("selective_option")) for l in selective.layers
                  if l["kind"] == "block"]
        self.assertEqual(chosen[0], ("selective", "attention_core"), chosen)
        self.assertLessEqual(set(chosen), {("selective", "attention_core"), ("keep", None)}, chosen)
        (option,) = traced[0]["selective"]
        self.assertEqual(option["name"], "attention_core")
        real = compiled_partitions(name, selective, count=1)
        self.assertEqual(real, [(option["saved_bytes"], option["saved_shapes"])])
        self.assertLess(option["saved_bytes"], want_bytes)

    def test_llama_blocks_save_what_inductor_partitions(self):
        self.check("llama")

    def test_gpt2_blocks_save_what_inductor_partitions(self):
        self.check("gpt2")


@unittest.skipIf(torch is None, needs.SKIPPED)
@needs.meter_library()
class CompiledPeaks(unittest.TestCase):
    TOLERANCE = 0.03

    @classmethod
    def setUpClass(cls):
        cls.cache = tempfile.TemporaryDirectory()  # one trace per model for all cells

    @classmethod
    def tearDownClass(cls):
        cls.cache.cleanup()

    def cell(self, name, strategy):
        got = compiled_cell.run(self, "remat_compile_peak.py", [name, strategy], self.cache.name)
        decisions = set(got["decisions"])
        if strategy == "optimal":  # a plan between none and uniform
            self.assertEqual(decisions, {"keep", "checkpoint"}, got)
        else:
            want = {"none": "keep", "uniform": "checkpoint", "selective": "selective"}[strategy]
            self.assertEqual(decisions, {want}, got)
        compiled_cell.check(self, got, f"{name} {strategy}", self.TOLERANCE)

    def test_llama_none(self):
        self.cell("llama", "none")

    def test_gpt2_none(self):
        self.cell("gpt2", "none")

    def test_llama_uniform(self):
        self.cell("llama", "uniform")

    def test_gpt2_uniform(self):
        self.cell("gpt2", "uniform")

    def test_llama_selective(self):
        self.cell("llama", "selective")

    def test_gpt2_selective(self):
        self.cell("gpt2", "selective")

    def test_llama_optimal(self):
        self.cell("llama", "optimal")

    def test_gpt2_optimal(self):
        self.cell("gpt2", "optimal")


if __name__ == "__main__":
    unittest.main()
