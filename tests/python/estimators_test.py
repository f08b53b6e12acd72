"""remat's per-rank model-state terms against the estimators users run.

For Llama-3-8B, GPT-2 XL and Mixtral-8x7B on N = 1, 8 and 64 GPUs
(bench/estimators/compare.py computes every figure), each assertion is the
exact relationship docs/distributed.md ("Against the estimators users run")
states: equal where both count the same bytes, apart by exactly the named
terms where not. Ψ is the parameter count of the transformers model on the
meta device (the step's buffers, Llama's rotary tables and position ids,
are apart from the weights: whole on every rank, not a model-state term).
Skipped, visibly, without torch, transformers, deepspeed or accelerate.
"""
import os
import sys
import unittest

SOURCE = os.environ.get("REMAT_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "bench", "estimators"))
import compare  # noqa: E402
import needs  # noqa: E402


@needs.modules("torch", "transformers", "deepspeed", "accelerate")
class AgainstEstimators(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rows = compare.rows()

    def each(self, check):
        """Runs check(row, Ψ, N) on every row, each a subtest."""
        for r in self.rows:
            with self.subTest(model=r["model"], n=r["n"]):
                # Every division below is exact for these three models.
                self.assertEqual(r["psi"] % 64, 0)
                check(r, r["psi"], r["n"])

    def test_deepspeed_zero2_is_remat_plus_the_fp32_gradient_partition(self):
        def check(r, psi, n):
            t = r["zero2_bf16"]  # DeepSpeed's default: gradients in the bf16 weights' dtype
            self.assertEqual(t["parameters"], 2 * psi)
            self.assertEqual(t["gradients"], 2 * psi // n)
            self.assertEqual(t["optimizer"], 12 * psi // n)
            weights_and_state = t["parameters"] + t["gradients"] + t["optimizer"]
            self.assertEqual(r["ds_zero2"], weights_and_state + 4 * psi // n)
            # "data_types": {"grad_accum_dtype": "fp32"}: remat's default
            # mixed_bf16 gradients; DeepSpeed's figure still adds the bf16 partition.
            t = r["zero2_fp32"]
            self.assertEqual(t["gradients"], 4 * psi // n)
            weights_and_state = t["parameters"] + t["gradients"] + t["optimizer"]
            self.assertEqual(r["ds_zero2"], weights_and_state + 2 * psi // n)
        self.each(check)

    def test_deepspeed_zero3_is_remat_with_fp32_gradients_plus_largest_layer(self):
        def check(r, psi, n):
            t = r["zero3_fp32"]
            self.assertEqual(t["parameters"], 2 * psi // n)
            self.assertEqual(t["gradients"], 4 * psi // n)
            self.assertEqual(t["optimizer"], 12 * psi // n)
            sharded = t["parameters"] + t["gradients"] + t["optimizer"]
            self.assertEqual(r["ds_zero3"], sharded + 4 * r["largest"])
            # DeepSpeed's default bf16 gradient partition: remat counts it,
            # DeepSpeed's 18Ψ/N counts fp32 gradients in its place.
            t = r["zero3_bf16"]
            self.assertEqual(t["gradients"], 2 * psi // n)
            sharded = t["parameters"] + t["gradients"] + t["optimizer"]
            self.assertEqual(r["ds_zero3"], sharded + 2 * psi // n + 4 * r["largest"])
            # Where DeepSpeed counts the largest layer in 4 bytes, remat counts
            # the root and two blocks gathered in 16 bits (and their share of B),
            # less the parameters under stage3_param_persistence_threshold,
            # held whole instead (zero3_persistent).
            unsharded = t.get("fsdp_unsharded", 0)
            if n == 1:
                self.assertEqual(unsharded, 0)
            else:
                gathered = 2 * (r["root"] + 2 * r["block"])
                persistent = t.get("zero3_persistent", 0)
                self.assertGreater(persistent, 0)
                self.assertGreaterEqual(unsharded + persistent, gathered)
                self.assertLessEqual(unsharded, gathered)
        self.each(check)

    def test_accelerate_counts_one_unsharded_fp32_replica(self):
        def check(r, psi, n):
            t, acc = r["ddp_amp"], r["acc_fp32"]  # amp_bf16: fp32 weights, gradients, moments
            self.assertEqual(acc["model"], t["parameters"])
            self.assertEqual(acc["gradients"], t["gradients"])
            self.assertEqual(acc["optimizer"], t["optimizer"])
            self.assertEqual(acc["step"], acc["model"] + acc["gradients"] + acc["optimizer"])
            self.assertEqual(max(acc.values()), 16 * psi)
            # DDP's gradient buckets, which accelerate does not count.
            self.assertEqual(t.get("ddp_buckets", 0), 4 * psi if n > 1 else 0)
        self.each(check)

    def test_accelerate_bf16_figure_is_its_largest_entry(self):
        def check(r, psi, n):
            acc = r["acc_bf16"]
            self.assertEqual(max(acc.values()), 8 * psi)
            if n == 1:  # its entries add up to mixed_bf16 with fp32 gradients
                t = r["zero2_fp32"]
                self.assertEqual(acc["model"] + acc["gradients"] + acc["optimizer"],
                                 t["parameters"] + t["gradients"]
                                 + t["optimizer"])
        self.each(check)


if __name__ == "__main__":
    unittest.main()
