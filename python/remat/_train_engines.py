"""The engines `python -m remat train` shards a model with: PyTorch's and
DeepSpeed's own, wrapped only to call them the same way and to count
their gradient synchronizations through their own hooks.

Each engine, given the rank's (already remat.apply'd) Hugging Face model:
  micro(ids, last)   forward and backward of one micro-batch; gradients
                     synchronized only where `last` (the optimizer step's
                     final micro-batch) by the engine's no-sync mechanism;
                     returns the loss (a float);
  step()             the optimizer step, gradients cleared;
  full_gradients()   {parameter name: the whole synchronized gradient}
                     (a collective: every rank calls it);
  syncs              the SyncCounter of its gradient synchronizations.
No sharding or collective logic of remat's own.
"""
import collections
import contextlib

LR = 1e-4


class SyncCounter:
    """Gradient synchronizations of one optimizer step, per unit (a DDP
    bucket, an FSDP2 module, DeepSpeed's reduction collectives), and how
    many happened in micro-batches that were not the step's last."""

    def __init__(self, unit):
        self.unit = unit
        self.counts = collections.Counter()
        self.in_non_final = 0
        self.last = False
        self.steps = []

    def count(self, key):
        self.counts[key] += 1
        if not self.last:
            self.in_non_final += 1

    def end_step(self):
        self.steps.append({"unit": self.unit, "units": len(self.counts),
                           "total": sum(self.counts.values()),
                           "per_unit": sorted(set(self.counts.values())),
                           "in_non_final_micro_batches": self.in_non_final})
        self.counts, self.in_non_final = collections.Counter(), 0


def _loss(module, ids):
    return module(input_ids=ids, labels=ids).loss


class _TorchEngine:
    """What the PyTorch engines share: each micro-batch's loss divided by
    K, backward under the engine's no-sync mechanism (sync_context), and
    torch's AdamW over the model's (sharded) parameters."""

    def _init(self, model, job):
        import torch

        self.model, self.k = model, job.grad_accumulation
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=LR)

    def sync_context(self, last):
        """The context a micro-batch's forward and backward run in: the
        engine's no-sync where not `last`."""
        return contextlib.nullcontext()

    def micro(self, ids, last):
        self.syncs.last = last
        with self.sync_context(last):
            loss = _loss(self.wrapped, ids) / self.k
            loss.backward()
        return loss.item() * self.k

    def step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class Ddp(_TorchEngine):
    """DistributedDataParallel (bucket_cap_mb from the plan); a comm hook
    counts each bucket's all-reduce and runs PyTorch's default one;
    no_sync() on the non-final micro-batches."""

    def __init__(self, model, job, device):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel

        self.ddp = self.wrapped = DistributedDataParallel(
            model, device_ids=[device] if device.type == "cuda" else None,
            bucket_cap_mb=job.bucket_cap_mb)
        self.syncs = SyncCounter("bucket")

        def hook(_, bucket):
            self.syncs.count(bucket.index())
            return default_hooks.allreduce_hook(None, bucket)

        self.ddp.register_comm_hook(None, hook)
        self._init(model, job)

    def sync_context(self, last):
        return contextlib.nullcontext() if last else self.ddp.no_sync()

    def full_gradients(self):
        return {n: p.grad.detach().clone() for n, p in self.model.named_parameters()
                if p.grad is not None}


def block_groups(model, plan, units="block"):
    """The decoder blocks grouped as fully_shard wraps them: one block per
    group (units "block", the plan's job.parallel.fsdp_units by default, as
    torchtitan, accelerate and transformers wrap), or with units "segment"
    the blocks of one recompute segment (a checkpoint over several blocks)
    as one group."""
    from ._blocks import find_blocks
    from ._segments import plan_segments

    _, blocks = find_blocks(model)
    if units != "segment":
        return [[b] for b in blocks]
    groups, covered = [], set()
    for seg in plan_segments(plan, "refuse")[0].segments:
        members = list(range(max(seg.start, 0), seg.stop))
        if seg.kind in ("checkpoint", "offload") and len(members) > 1:
            groups.append(members)
            covered.update(members)
    groups += [[i] for i in range(len(blocks)) if i not in covered]
    groups.sort()
    return [[blocks[i] for i in g] for g in groups]


class Fsdp2(_TorchEngine):
    """torch.distributed.fsdp.fully_shard per decoder block (per recompute
    segment where the plan says job.parallel.fsdp_units "segment",
    block_groups) then the root, with the plan's reshard_after_forward;
    per-block units under multi-block segments gathered as each block
    computes (remat.apply runs each between its unit's hooks);
    set_all_reduce_hook counts each module's
    gradient reduction; set_requires_gradient_sync(False) on the non-final
    micro-batches where the plan says so (job.parallel.fsdp_no_sync), else
    a reduce-scatter in every micro-batch."""

    def __init__(self, model, job, device):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

        self.wrapped = model
        mesh = init_device_mesh(device.type, (job.nproc,))
        self.syncs = SyncCounter("module")
        groups = block_groups(model, job.plan, job.fsdp_units)
        # --fsdp-cpu-offload: the shards, their gradients and the optimizer
        # state on the host (pinned where there is a GPU to copy to).
        self.offload = job.state_offload == "fsdp_cpu"
        kwargs = ({"offload_policy": CPUOffloadPolicy(pin_memory=device.type == "cuda")}
                  if self.offload else {})
        for group in groups:
            fully_shard(group if len(group) > 1 else group[0], mesh=mesh,
                        reshard_after_forward=job.reshard_after_forward, **kwargs)
        fully_shard(model, mesh=mesh, **kwargs)
        self.groups = len(groups) + 1
        self.no_sync = job.fsdp_no_sync
        for i, module in enumerate([g[0] for g in groups] + [model]):
            module.set_all_reduce_hook(lambda _, key=i: self.syncs.count(key))
        self._init(model, job)

    def sync_context(self, last):
        self.model.set_requires_gradient_sync(last or not self.no_sync)
        return contextlib.nullcontext()

    def full_gradients(self):
        return {n: p.grad.full_tensor().detach() for n, p in self.model.named_parameters()
                if p.grad is not None}

    def host_bytes(self):
        """Under CPUOffloadPolicy, the bytes the host holds of the state:
        the parameter and gradient shards and the optimizer's tensors, each
        storage once; None without offload."""
        if not self.offload:
            return None
        tensors = []
        for p in self.model.parameters():
            tensors.append(p.to_local())
            if p.grad is not None:
                tensors.append(p.grad.to_local())
        for state in self.optimizer.state.values():
            tensors.extend(v for v in state.values() if hasattr(v, "untyped_storage"))
        return _storage_bytes(tensors)


def _storage_bytes(tensors):
    """The bytes of the storages under `tensors`, each counted once."""
    seen = {}
    for t in tensors:
        t = t.to_local() if hasattr(t, "to_local") else t  # a DTensor: its shard
        if t.numel() == 0:
            continue
        base = t.data_ptr() - t.storage_offset() * t.element_size()
        seen[base] = max(seen.get(base, 0), t.untyped_storage().nbytes())
    return sum(seen.values())


class DeepSpeed:
    """deepspeed.initialize with ZeRO stage 1, 2 or 3, AdamW (torch's,
    DeepSpeed's torch_adam) and gradient_accumulation_steps K; its own
    comms logger counts the reduction collectives each backward issues.
    Its buckets (reduce_bucket_size, allgather_bucket_size) hold the
    plan's bucket_cap_mb of fp32 elements; ZeRO-3 keeps parameters of at
    most the plan's persistence_threshold elements whole
    (stage3_param_persistence_threshold).
    ZeRO-2 and -3 reduce at every micro-batch (their engine refuses
    no_sync: the gradient partitions accumulate reduced gradients)."""

    REDUCTIONS = ("all_reduce", "reduce_scatter_tensor", "reduce_scatter", "reduce",
                  "all_to_all_single")

    def __init__(self, model, job, device):
        import deepspeed
        import deepspeed.comm as dcomm

        self.model, self.dcomm = model, dcomm
        offload = job.state_offload == "optimizer"
        self.offload = offload
        bucket = int(job.bucket_cap_mb * 2**20) // 4
        config = {
            "train_micro_batch_size_per_gpu": job.micro_batch,
            "gradient_accumulation_steps": job.grad_accumulation,
            "train_batch_size": job.global_batch,
            # DeepSpeed's buckets at the plan's bucket_cap_mb (fp32
            # elements); its default, 5e8 elements, is a 2 GB fp32 buffer
            # ZeRO-2 allocates whatever the model's size.
            "zero_optimization": {"stage": job.zero, "reduce_bucket_size": bucket,
                                  "allgather_bucket_size": bucket,
                                  "stage3_param_persistence_threshold":
                                      job.persistence_threshold},
            "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": 0.01,
                                                      "torch_adam": not offload}},
            "comms_logger": {"enabled": True, "prof_all": True, "verbose": False},
            "steps_per_print": 1 << 30,
        }
        if offload:
            # ZeRO-Offload: the optimizer's state on the host, stepped by
            # DeepSpeedCPUAdam (its cpu_adam op, JIT-built once).
            config["zero_optimization"]["offload_optimizer"] = {"device": "cpu",
                                                                "pin_memory": False}
        self.engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                    config=config)
        self.syncs = SyncCounter("collective")

    def _reductions(self):
        logged = self.dcomm.comms_logger.comms_dict
        return {op: sum(v[0] for v in logged.get(op, {}).values()) for op in self.REDUCTIONS}

    def micro(self, ids, last):
        self.syncs.last = last
        loss = _loss(self.engine, ids)
        before = self._reductions()
        self.engine.backward(loss)
        for op, n in self._reductions().items():
            for _ in range(n - before[op]):
                self.syncs.count(op)
        if not last:
            self.engine.step()  # DeepSpeed counts micro-batches in step()
        return loss.item()

    def step(self):
        self.engine.step()

    def full_gradients(self):
        from deepspeed.utils import safe_get_full_grad

        return {n: safe_get_full_grad(p).detach().clone() for n, p in self.model.named_parameters()}

    def host_bytes(self):
        """Under ZeRO-Offload, the bytes the host holds for the optimizer:
        the fp32 partitions and their gradients, the optimizer's state,
        ZeRO-1/2's 16-bit partition buffers and gradient staging buffer, each
        storage once; None without offload."""
        if not self.offload:
            return None
        opt = self.engine.optimizer
        tensors = []
        for name in ("single_partition_of_fp32_groups", "fp32_partitioned_groups_flat",
                     "param_buffer_of_bit16_for_cpu_offload_groups"):
            for t in getattr(opt, name, None) or []:
                tensors.append(t)
                if getattr(t, "grad", None) is not None:
                    tensors.append(t.grad)
        staging = getattr(opt, "temp_grad_buffer_for_cpu_offload", None)
        if staging is not None:
            tensors.append(staging)
        for state in opt.optimizer.state.values():
            tensors.extend(v for v in state.values() if hasattr(v, "untyped_storage"))
        return _storage_bytes([t for t in tensors if t.device.type == "cpu"])


TP_PLAN = {"self_attn.q_proj": "col", "self_attn.k_proj": "col", "self_attn.v_proj": "col",
           "self_attn.o_proj": "row", "mlp.gate_proj": "col", "mlp.up_proj": "col",
           "mlp.down_proj": "row"}


class TensorParallel(_TorchEngine):
    """torch.distributed.tensor.parallel.parallelize_module on each decoder
    block: ColwiseParallel on q, k, v, gate and up, RowwiseParallel on o
    and down, over a DeviceMesh of every rank; the embedding, norms and
    head stay replicated. Every rank takes the same rows; the weights'
    gradients are each rank's own shards (replicated parameters get the
    same gradient on every rank), so nothing synchronizes gradients."""

    def __init__(self, model, job, device):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)

        from ._blocks import find_blocks

        self.wrapped = model
        mesh = init_device_mesh(device.type, (job.nproc,))
        styles = {"col": ColwiseParallel, "row": RowwiseParallel}
        for block in find_blocks(model)[1]:
            names = {n for n, _ in block.named_modules()}
            missing = sorted(set(TP_PLAN) - names)
            if missing:
                from ._planner import EXIT_BAD_INPUT, InputError

                raise InputError(f"remat train: --engine tp: the model's blocks have no "
                                 f"{', '.join(missing)} (it splits Llama-style q/k/v/o and "
                                 "gate/up/down projections)", EXIT_BAD_INPUT)
            parallelize_module(block, mesh, {n: styles[s]() for n, s in TP_PLAN.items()})
        # Vocabulary-parallel embedding and head (Megatron's, torchtitan's
        # plan): the embedding's rows split, its output summed to every
        # rank; the head's columns split, the logits gathered for the loss.
        embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
        if embedding is not None and head is not None and embedding.weight is not head.weight:
            from torch.distributed.tensor import Replicate

            parallelize_module(embedding, mesh, RowwiseParallel(input_layouts=Replicate()))
            parallelize_module(head, mesh, ColwiseParallel(output_layouts=Replicate()))
        self.syncs = SyncCounter("none")
        self._init(model, job)

    def full_gradients(self):
        from torch.distributed.tensor import DTensor

        return {n: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad).detach()
                for n, p in self.model.named_parameters() if p.grad is not None}


ENGINES = {"ddp": Ddp, "fsdp2": Fsdp2, "deepspeed": DeepSpeed, "tp": TensorParallel}
