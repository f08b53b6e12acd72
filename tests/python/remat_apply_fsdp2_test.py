"""remat.apply under FSDP2 (torch.distributed.fsdp.fully_shard) per block,
as `planner --export pytorch` writes it: a plan whose recompute segments
span two blocks, on 2 Gloo ranks on CPU.

remat.apply runs a segment's later blocks inside its first block's call,
so each block must be gathered by its own unit's pre-forward there
(python/remat/apply.py, _Segment.forward_of): otherwise the later blocks
compute with their sharded parameters. Each rank trains a tiny Llama (4
blocks, hidden 64, fp32, no dropout) on its own micro-batch with the plan
applied, fully_shard applied to each block and the root after
remat.apply (the exported snippet's order) and before it; and once more
after remat.unapply (the units' own hooks registered again). Rank 0's full
gradients (DTensor.full_tensor) must equal the mean of the two
micro-batches' gradients of the plain model in one process: the recompute
runs the same ops on the same inputs, so they differ only by the order of
the averaging's fp32 additions (1e-6 relative, far below any real
difference, as in remat_apply_test.py).

Run by CTest (label "python") with PYTHONPATH=build/python; skipped,
visibly, where torch or transformers is missing (tests/python/needs.py).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import needs

RELATIVE = 1e-6
NPROC = 2
LLAMA = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=64,
             intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256, max_position_embeddings=128,
             rms_norm_eps=1e-6, tie_word_embeddings=False)
MICRO_BATCH, SEQ_LEN = 2, 32
ORDERS = ("apply_then_shard", "shard_then_apply", "unapplied")
RUN_TIMEOUT_S = 240


def model_and_batches(config):
    import torch
    import transformers

    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.AutoConfig.for_model(config["model_type"], **fields)).train()
    model.config.use_cache = False
    torch.manual_seed(1)
    ids = torch.randint(0, config["vocab_size"], (NPROC, MICRO_BATCH, SEQ_LEN))
    return model, ids


def step(model, ids):
    model.zero_grad(set_to_none=True)
    model(input_ids=ids, labels=ids).loss.backward()


def rank_main(rank, workdir):
    """One rank: each order's full gradients, saved by rank 0."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import remat

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(workdir, "store"),
                            rank=rank, world_size=NPROC)
    mesh = init_device_mesh("cpu", (NPROC,))
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    plan = os.path.join(workdir, "plan.json")

    def shard(model):
        for block in model.model.layers:
            fully_shard(block, mesh=mesh, reshard_after_forward=True)
        fully_shard(model, mesh=mesh)

    grads = {}
    for order in ORDERS[:2]:
        model, ids = model_and_batches(config)
        if order == "apply_then_shard":
            remat.apply(model, plan)
            shard(model)
        else:
            shard(model)
            remat.apply(model, plan)
        step(model, ids[rank])
        grads[order] = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
        if order == "shard_then_apply":
            remat.unapply(model)
            step(model, ids[rank])
            grads["unapplied"] = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
    if rank == 0:
        torch.save(grads, os.path.join(workdir, "grads.pt"))
    print(f"rank {rank}: gradients taken", flush=True)
    # Both ranks reach the end before either tears its Gloo pairs down:
    # a rank that destroys the group while its peer still holds the
    # connection open can abort in Gloo's teardown (std::terminate).
    dist.barrier()
    print(f"rank {rank}: barrier passed", flush=True)
    dist.destroy_process_group()
    print(f"rank {rank}: group destroyed", flush=True)


@needs.modules("torch", "transformers")
class ApplyFsdp2Test(unittest.TestCase):
    def test_two_block_segments_under_per_block_units(self):
        import torch

        import remat
        from remat._segments import plan_segments

        with tempfile.TemporaryDirectory() as workdir:
            config = os.path.join(workdir, "config.json")
            with open(config, "w") as f:
                json.dump(LLAMA, f)
            plan = remat.plan(config, budget="1GB", micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                              precision="fp32", device="cpu", strategy="uniform", every=2).json
            spans = [s.stop - max(s.start, 0) for s in plan_segments(plan, "refuse")[0].segments
                     if s.kind != "keep"]
            self.assertEqual(spans, [2, 2], plan_segments(plan, "refuse")[0].segments)
            with open(os.path.join(workdir, "plan.json"), "w") as f:
                json.dump(plan, f)

            env = dict(os.environ, OMP_NUM_THREADS="1")
            ranks = [subprocess.Popen([sys.executable, "-B", os.path.abspath(__file__),
                                       str(rank), workdir], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
                     for rank in range(NPROC)]
            outputs = [r.communicate(timeout=RUN_TIMEOUT_S)[0] for r in ranks]
            for rank, (r, out) in enumerate(zip(ranks, outputs)):
                self.assertEqual(r.returncode, 0, f"rank {rank}:\n{out}")
            grads = torch.load(os.path.join(workdir, "grads.pt"))

            model, ids = model_and_batches(LLAMA)
            reference = {}
            for rank in range(NPROC):
                step(model, ids[rank])
                for n, p in model.named_parameters():
                    reference[n] = reference.get(n, 0) + p.grad.double() / NPROC
            for order in ORDERS:
                worst = 0.0
                for n, want in reference.items():
                    got = grads[order][n].double()
                    scale = want.abs().max().item()
                    error = (got - want).abs().max().item()
                    worst = max(worst, error / scale)
                    self.assertLessEqual(error, RELATIVE * scale, f"{order}: {n}")
                print(f"{order}: gradients within {worst:.2e} (relative) of one process",
                      file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        rank_main(int(sys.argv[1]), sys.argv[2])
        # The rank's work is done and its files are closed: leave without
        # the interpreter's finalization, where a Gloo worker thread still
        # holding a tensor can abort the process (std::terminate).
        sys.stdout.flush()
        os._exit(0)
    else:
        unittest.main()
