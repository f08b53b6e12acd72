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

Peaks: remat_compile_peak.py (one process per cell, the meter loaded
first) plans none and uniform (every block checkpointed) with
compile=True, applies the plan, compiles the model whole and meters the
third AdamW step; the measured peak must be within 3% of the prediction
for the Llama and the GPT-2, each without checkpoints and with every
block checkpointed. 3% is the project's stated bar, not a bound derived
from the mechanism: what the compiled trace models (the blocks' saved
tensors, exact as the cases above show, and the buffers inductor plans
for each block's backward, kept and checkpointed) is inductor's own
figure; the forward workspaces and the layers outside the blocks are
eager's, and the gradient of the logits the compiled backward holds
while it runs is not modelled (docs/compile.md).

Run by CTest (label "python"); skipped, visibly, where torch or
transformers is missing. TORCHINDUCTOR_CACHE_DIR (CTest's, shared with
remat_compile_test) keeps the compiled kernels for the next run;
AOTAutograd's cache is off here, so that each compile partitions.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import needs
import remat

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "compile"))

if needs.missing("torch", "transformers"):
    torch = None
else:
    import torch
    from tiny_models import BLOCKS, MICRO_BATCH, MODELS, SEQ_LEN, build, plan_options, \
        write_config


def compiled_partitions(name, plan=None):
    """[(bytes, [shapes])] of each partition inductor makes while the
    model's blocks, each compiled alone (after remat.apply(plan) when
    given), run one training step."""
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
            for i, block in enumerate(originals):
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
        for saved_bytes, shapes in compiled_partitions(name, uniform):
            self.assertEqual(saved_bytes, 0, shapes)

    def test_llama_blocks_save_what_inductor_partitions(self):
        self.check("llama")

    def test_gpt2_blocks_save_what_inductor_partitions(self):
        self.check("gpt2")


@unittest.skipIf(torch is None, needs.SKIPPED)
class CompiledPeaks(unittest.TestCase):
    TOLERANCE = 0.03

    def cell(self, name, strategy):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, REMAT_PYTHON=sys.executable, REMAT_TRACE_CACHE=cache)
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "remat_compile_peak.py")
            done = subprocess.run([sys.executable, script, name, strategy], env=env,
                                  capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        got = json.loads(done.stdout.strip().splitlines()[-1])
        self.assertEqual(got["source"], "traced (torch.compile)")
        want = {"none": "keep", "uniform": "checkpoint"}[strategy]
        self.assertEqual(set(got["decisions"]), {want}, got)
        miss = got["measured_peak_bytes"] / got["predicted_peak_bytes"] - 1
        print(f"{name} {strategy}: predicted {got['predicted_peak_bytes']:,} B, measured "
              f"{got['measured_peak_bytes']:,} B ({100 * miss:+.2f}%), eager prediction "
              f"{got['eager_predicted_peak_bytes']:,} B", file=sys.stderr)
        self.assertLessEqual(abs(miss), self.TOLERANCE, got)

    def test_llama_none(self):
        self.cell("llama", "none")

    def test_gpt2_none(self):
        self.cell("gpt2", "none")

    def test_llama_uniform(self):
        self.cell("llama", "uniform")

    def test_gpt2_uniform(self):
        self.cell("gpt2", "uniform")


if __name__ == "__main__":
    unittest.main()
