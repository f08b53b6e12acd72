"""What a compiled training step keeps, against eager, on CPU.

Two tables, on the models of tests/python/remat_compile_test.py (a tiny
Hugging Face Llama with GQA and a GPT-2: 4 blocks, hidden 64, vocabulary
256, micro-batch 2 x 32 tokens, sdpa, fp32, dropout 0), under remat's
plans none, uniform (every block checkpointed) and selective (the
selective strategy's lowest peak: attention_core on every block), each
applied with remat.apply:

  peaks   the metered peak (remat's CPU meter) of one step (forward, loss,
          backward; gradients created in the backward, the batch and the
          weights included), eager and compiled whole (inductor, default
          partitioner), the second of two steps (the first compiles);
          one child process per cell: the meter is loaded before torch
          allocates;
  saved   per block, the bytes and the tensors the backward gets from the
          forward, less the block's input and the weights (memory that
          lives anyway): eager's saved tensors (autograd's saved-tensor
          hooks, each storage once) and the compiled block's (each block
          compiled as torchtitan compiles it, fullgraph, static shapes; the
          forward graph's outputs that AOTAutograd's partitioner hands
          the backward, less its inputs: inductor's decompositions and
          its partition function (joint-graph passes, then the min-cut
          partitioner), the partition inductor compiles).

usage: PYTHONPATH=build/python:python .venv/bin/python bench/compile/kept.py [peaks|saved ...]
  env: REMAT_METER_LIB (build/lib/libremat_cpu_meter.so), TORCHINDUCTOR_CACHE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

from tiny_models import BLOCKS, MICRO_BATCH, MODELS, SEQ_LEN, build, lowest_plan, plan_options, \
    training_step, write_config

PLANS = ("none", "uniform", "selective")


def plan_for(name, plan_name, directory):
    import remat

    path = write_config(name, directory)
    options = plan_options()
    if plan_name == "selective":
        return lowest_plan(path, plan_name, **options)
    return remat.plan(path, budget="1GB", strategy=plan_name, **options)


def peak_cell(name, plan_name, mode):
    """One cell in this process: the metered peak of the second step."""
    import remat_measure

    meter = remat_measure.load()
    import remat
    import torch

    with tempfile.TemporaryDirectory() as directory:
        plan = plan_for(name, plan_name, directory)
    model = build(name)
    remat.apply(model, plan)
    step = training_step(name, model, torch.compile(model) if mode == "compiled" else model)
    step()
    m = remat_measure.measure(step, timeline=False, meter=meter)
    return m.baseline_bytes + m.peak_bytes, plan.predicted_peak_bytes


def peaks():
    print("model  plan       eager peak B   compiled peak B   compiled/eager")
    for name in MODELS:
        for plan_name in PLANS:
            row = {}
            for mode in ("eager", "compiled"):
                out = subprocess.run([sys.executable, __file__, "cell", name, plan_name, mode],
                                     check=True, capture_output=True, text=True).stdout
                row[mode] = json.loads(out.strip().splitlines()[-1])["peak"]
            print(f"{name:6} {plan_name:10} {row['eager']:>13,} {row['compiled']:>17,}"
                  f"   {row['compiled'] / row['eager']:.4f}", flush=True)


def _storage_bytes(tensors):
    seen = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def saved():
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.decomposition import select_decomp_table

    import remat
    from remat._trace_compile import saved_tensors

    for name in MODELS:
        for plan_name in PLANS:
            with tempfile.TemporaryDirectory() as directory:
                plan = plan_for(name, plan_name, directory)
            model = build(name)
            ids = torch.randint(0, MODELS[name]["vocab_size"], (MICRO_BATCH, SEQ_LEN))
            blocks = model.get_submodule(BLOCKS[name])
            originals = list(blocks)
            remat.apply(model, plan)
            # Eager: what autograd saves while each block's forward runs.
            eager = {i: [] for i in range(len(originals))}
            current = [None]
            handles = []
            lives = {p.untyped_storage().data_ptr() for p in model.parameters()}

            def enter(i):
                def hook(_, args, kwargs):
                    current[0] = i
                    hidden = args[0] if args else kwargs.get("hidden_states")
                    lives.add(hidden.untyped_storage().data_ptr())

                return hook

            for i, block in enumerate(originals):
                handles.append(block.register_forward_pre_hook(enter(i), with_kwargs=True))
                handles.append(block.register_forward_hook(
                    lambda *_: current.__setitem__(0, None)))

            def pack(t):
                if (current[0] is not None and isinstance(t, torch.Tensor)
                        and t.untyped_storage().data_ptr() not in lives):
                    eager[current[0]].append(t)
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            for h in handles:
                h.remove()
            # Compiled block by block: the partitioned backward's inputs
            # that are not tangents are the forward's saved tensors.
            compiled = {}

            def backend_for(i):
                def backend(gm, inputs):
                    def partition(joint, joint_inputs, **kwargs):
                        fw, bw = partition_fn(joint, joint_inputs, **kwargs)
                        kept = [(shape, nbytes) for _, shape, nbytes in saved_tensors(fw, bw)]
                        compiled[i] = kept
                        return fw, bw

                    return aot_module_simplified(gm, inputs, fw_compiler=lambda g, _: g,
                                                 bw_compiler=lambda g, _: g,
                                                 partition_fn=partition,
                                                 decompositions=select_decomp_table())

                return backend

            torch._dynamo.reset()
            torch._dynamo.config.automatic_dynamic_shapes = False
            for i, block in enumerate(originals):
                blocks.register_module(str(i), torch.compile(block, backend=backend_for(i),
                                                             fullgraph=True))
            model.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            for i, block in enumerate(originals):
                blocks.register_module(str(i), block)
            remat.unapply(model)
            for i in range(len(originals)):
                shapes = compiled.get(i, [])
                print(f"{name:6} {plan_name:10} block{i}  eager saved {_storage_bytes(eager[i]):>9,} B"
                      f" ({len(eager[i])} tensors)   compiled saved "
                      f"{sum(b for _, b in shapes):>9,} B ({len(shapes)} tensors: "
                      f"{', '.join('x'.join(map(str, s)) or 'scalar' for s, _ in shapes)})",
                      flush=True)


def main(argv):
    if argv[:1] == ["cell"]:
        peak, predicted = peak_cell(*argv[1:4])
        print(json.dumps({"peak": peak, "predicted": predicted}))
        return 0
    for what in argv or ["peaks", "saved"]:
        {"peaks": peaks, "saved": saved}[what]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
