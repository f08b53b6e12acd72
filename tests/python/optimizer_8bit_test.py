"""bitsandbytes' AdamW8bit against the plan of --optimizer adamw8bit, on the
CPU: the bytes of its state (uint8 moments, an fp32 scale per 256
elements, fp32 moments under 4,096 elements, the shared quantization maps
once) equal to the plan's optimizer state on optimizer_state_test.py's
small Llama and GPT-2, and the real all-MiniLM-L6-v2's second step metered
within 3% of the plan's peak, which is its optimizer step (the CPU path's
fp32 copies; remat_minilm_test.py's harness). A file of its own: it skips,
visibly, without bitsandbytes (scripts/install-deps.sh --references
installs it).

Run by CTest (python_optimizer_8bit, label "python").
"""
import unittest

import needs
import optimizer_state_test
import remat_minilm_test

CELLS = [{"name": "none-adamw8bit", "texts": 2, "micro_batch": 4, "seq_len": 64,
          "optimizer": "adamw8bit", "strategy": "none", "over": 0.005}]


@needs.modules("torch", "transformers", "bitsandbytes")
class AdamW8bit(unittest.TestCase):
    def test_state_bytes(self):
        optimizer_state_test.check(self, "adamw8bit")

    @needs.modules(*remat_minilm_test.NEEDS)
    @needs.meter_library()
    def test_the_metered_step(self):
        cells = remat_minilm_test.run_cells(self, CELLS)
        self.assertEqual(cells["none-adamw8bit"]["peak_op"], "optimizer_step")


if __name__ == "__main__":
    unittest.main()
