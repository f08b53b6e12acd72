"""plan(compile=True) of a sentence-transformers job against metered
compiled steps: a tiny BERT in a SentenceTransformer trained with
sentence-transformers' MultipleNegativesRankingLoss on triplets
(remat_sentence_compile_peak.py, one process per cell, the meter loaded
first). The trace runs the job's step as sentence-transformers runs it
(python/remat/_trace_sentence.py: the anchors' pass, then the other
columns merged into a second), so the plan's layers are per pass
(p1.block0.., p2.block0..), and remat.apply carries each pass's decisions
out on the compiled model. Cells: none; uniform, every block of both
passes checkpointed; selective, the selective strategy's lowest peak;
optimal, at a budget between uniform's and none's, some blocks
checkpointed. The measured peak must be within 3% of the prediction (the
project's stated bar, as in remat_trace_compile_test.CompiledPeaks: the
compiled trace models the blocks as inductor partitions them, the rest
as eager's) and at or below the plan's budget, and the first compiled
step's gradients within fp32's rounding bound of a float64 eager step.

Run by CTest (label "python"); skipped, visibly, where torch,
transformers or sentence-transformers is missing, or remat's CPU meter
is not built. TORCHINDUCTOR_CACHE_DIR
(CTest's, shared with remat_compile_test) keeps the compiled kernels for
the next run.
"""
import tempfile
import unittest

import compiled_cell
import needs


@unittest.skipIf(needs.missing("torch", "transformers", "sentence_transformers"), needs.SKIPPED)
@needs.meter_library()
class SentenceCompiledPeaks(unittest.TestCase):
    TOLERANCE = 0.03

    @classmethod
    def setUpClass(cls):
        cls.cache = tempfile.TemporaryDirectory()  # one trace for all cells

    @classmethod
    def tearDownClass(cls):
        cls.cache.cleanup()

    def cell(self, strategy):
        got = compiled_cell.run(self, "remat_sentence_compile_peak.py", [strategy],
                                self.cache.name)
        # Both passes' blocks, planned apart: the anchors' and the merged
        # candidates'.
        blocks = [n for n in got["layers"] if ".block" in n]
        self.assertEqual(blocks, [f"p{p}.block{k}" for p in (1, 2) for k in range(4)], got)
        decisions = set(got["decisions"])
        if strategy == "optimal":  # between none and uniform: some blocks checkpointed
            self.assertIn("checkpoint", decisions, got)
            self.assertGreater(len(decisions), 1, got)
        elif strategy == "selective":  # at its lowest peak a block may stay whole
            self.assertIn("selective", decisions, got)
            self.assertLessEqual(decisions, {"selective", "keep"}, got)
        else:
            want = {"none": "keep", "uniform": "checkpoint"}[strategy]
            self.assertEqual(decisions, {want}, got)
        compiled_cell.check(self, got, f"bert mnrl {strategy}", self.TOLERANCE)

    def test_none(self):
        self.cell("none")

    def test_uniform(self):
        self.cell("uniform")

    def test_selective(self):
        self.cell("selective")

    def test_optimal(self):
        self.cell("optimal")


if __name__ == "__main__":
    unittest.main()
