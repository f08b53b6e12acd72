"""The micro-batches each pipeline rank of a plan holds in flight, against
megatron-core's own schedules, on real layouts.

For each published config in examples/hf and each pipeline layout (stages
p, schedule, virtual stages v, micro-batches per step M), `planner --pp`
plans every stage and reports, per distinct rank, the micro-batches in
flight at its peak for each model chunk it runs
(`predicted.per_rank[].in_flight_microbatches`). megatron-core tells the
same: `get_pp_rank_microbatches` gives the warm-up forwards W of a rank
(for 1F1B, p - r - 1, as forward_backward_pipelining_without_interleaving
counts them; for the interleaved schedule its own formula) and the
remaining steps; the first steady-state step runs one more forward before
the rank's first backward (when any remain), and `get_schedule_table`
says which model chunk each of those forwards runs. Run by CTest (label
"python") with PLANNER set; skipped, visibly, where megatron-core is not
importable.
"""
import json
import os
import subprocess
import types
import unittest

import needs

SOURCE = os.environ.get("REMAT_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
PLANNER = os.environ.get("PLANNER", "")
MODELS = os.path.join(SOURCE, "examples", "hf")

# (config, stages, virtual stages (1: 1F1B), micro-batches per step)
LAYOUTS = [
    ("llama-3-8b", 4, 1, 1),
    ("llama-3-8b", 4, 1, 8),
    ("llama-3-8b", 8, 1, 4),
    ("llama-3-8b", 4, 2, 8),
    ("llama-3-8b", 8, 2, 16),
    ("llama-3-8b", 2, 4, 4),
    ("mixtral-8x7b", 4, 2, 4),
    ("mixtral-8x7b", 8, 1, 32),
    ("qwen3-8b", 4, 3, 12),
    ("qwen3-8b", 6, 1, 2),
]


def megatron_in_flight(p, v, m, rank):
    """Micro-batches per model chunk whose forward has run and whose
    backward has not when `rank`'s first backward starts, from
    megatron-core's functions."""
    from megatron.core.pipeline_parallel.schedules import (get_pp_rank_microbatches,
                                                           get_schedule_table)
    group = types.SimpleNamespace(size=lambda: p, rank=lambda: rank)
    comm = types.SimpleNamespace(pp_group=group,
                                 virtual_pipeline_model_parallel_size=v if v > 1 else None)
    chunks = v if v > 1 else 1
    _, _, warmup, remaining = get_pp_rank_microbatches(m, chunks, p, p2p_communicator=comm)
    forwards = warmup + (1 if remaining > 0 else 0)
    counts = [0] * chunks
    for _, chunk in get_schedule_table(m, chunks, p)[:forwards]:
        counts[chunk] += 1
    return counts


def planned_in_flight(config, p, v, m):
    args = [PLANNER, "--budget", "1TB", "--strategy", "none", "--gpus", str(p), "--pp", str(p),
            "--micro-batch", "1", "--seq-len", "2048", "--grad-accumulation", str(m),
            "--json", "--quiet"]
    if v > 1:
        args += ["--pp-schedule", "interleaved", "--virtual-stages", str(v)]
    r = subprocess.run(args + [os.path.join(MODELS, config + ".config.json")],
                       capture_output=True, text=True)
    if r.returncode not in (0, 3):
        raise AssertionError(f"planner exited {r.returncode}: {r.stderr.strip()}")
    return {e["stage"]: e["in_flight_microbatches"]
            for e in json.loads(r.stdout)["predicted"]["per_rank"]}


@needs.modules("megatron.core")
@unittest.skipIf(not PLANNER, "PLANNER (the planner executable) is not set")
class InFlight(unittest.TestCase):
    def test_every_rank_as_megatron_core_schedules_it(self):
        for config, p, v, m in LAYOUTS:
            planned = planned_in_flight(config, p, v, m)
            self.assertEqual(sorted(planned), list(range(p)))
            for rank in range(p):
                with self.subTest(config=config, stages=p, virtual=v, microbatches=m, rank=rank):
                    self.assertEqual(planned[rank], megatron_in_flight(p, v, m, rank))

    def test_first_rank_holds_more_than_one(self):
        # A non-trivial layout: the check above must compare counts above 1.
        self.assertEqual(megatron_in_flight(4, 1, 8, 0), [4])
        self.assertEqual(megatron_in_flight(4, 2, 8, 0), [7, 4])


if __name__ == "__main__":
    unittest.main()
