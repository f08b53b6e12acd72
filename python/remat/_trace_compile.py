"""What a compiled block keeps for its backward, under fake tensors.

torch.compile (inductor) hands a block's joint forward-backward graph to
AOTAutograd, whose partitioner (inductor's partition_fn: its joint-graph
passes, then min_cut_rematerialization_partition, which at
activation_memory_budget 1.0 still recomputes cheap ops in the backward)
splits it: the forward graph's outputs past the block's own are the
tensors the backward gets, what the compiled block keeps. Here the same
AOTAutograd (inductor's decompositions, inductor's partition function)
traces one block call on the tracer's fake tensors and records that
partition; nothing is allocated and no kernel is generated, so a 70B
model's block partitions as a tiny one's.

saved_tensors(fw, bw) reads a partition the way the tests read the real
compiled block's (tests/python/remat_trace_compile_test.py), so the two
count alike: the backward's inputs that are not tangents, each traced to
the forward node whose memory it lives in (through views), the forward's
inputs (the block's input, weights, masks: memory that lives anyway)
aside, each memory once.

backward_peak(bw) is the peak of the backward graph's buffers as inductor
plans them: the graph lowered and scheduled by inductor's own
compile_fx_inner, stopped once its peak-memory pass has ordered the nodes
(before any kernel is generated). A block is partitioned twice: as it is
kept, and checkpointed (its forward ops tagged for recompute as dynamo
tags a checkpointed region), whose backward graph recomputes the forward;
the two backwards' peaks give the profile's backward workspaces.
"""
import torch


def _base(node):
    """The fx node whose memory `node`'s value lives in: through view ops
    (outputs that alias their first argument) to the node that made it."""
    while node.op == "call_function" and node.args and hasattr(node.target, "_schema"):
        schema = node.target._schema
        returns = schema.returns
        if not (returns and returns[0].alias_info is not None and not schema.is_mutable):
            break
        node = node.args[0]
    return node


def _nbytes(node):
    v = node.meta.get("val")
    return int(v.numel()) * v.element_size() if isinstance(v, torch.Tensor) else 0


def saved_tensors(fw, bw):
    """[(name, shape, bytes)] of the distinct forward-made tensors the
    partitioned backward `bw` gets from the forward graph `fw`."""
    nodes = {n.name: n for n in fw.graph.nodes}
    kept, bases = [], set()
    for n in bw.graph.nodes:
        if (n.op != "placeholder" or n.name.startswith("tangents")
                or not isinstance(n.meta.get("val"), torch.Tensor)):
            continue
        base = _base(nodes.get(n.name, n))
        if base.op in ("placeholder", "get_attr") or base.name in bases:
            continue  # an input's memory, or a tensor already counted
        bases.add(base.name)
        v = base.meta["val"]
        kept.append((base.name, tuple(int(d) for d in v.shape), _nbytes(base)))
    return kept


def output_bases(fw, count):
    """The names and bytes of the forward-made memory behind the forward
    graph's first `count` outputs (the block's own outputs)."""
    out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    found = {}
    for n in out[:count]:
        if isinstance(n, torch.fx.Node):
            base = _base(n)
            if base.op not in ("placeholder", "get_attr"):
                found[base.name] = _nbytes(base)
    return found


class _Scheduled(Exception):
    """Raised from inside inductor once its schedule's peak is read: the
    kernels are not generated."""


def backward_peak(bw):
    """The peak bytes inductor plans for the backward graph `bw` (fake
    tensors), or None where inductor did not plan it: the graph lowered
    and scheduled as torch.compile's backward compiler does it
    (compile_fx_inner), in the order inductor's peak-memory pass picks,
    its buffers (each its allocation) and the saved tensors it reads live
    from their making to their last use (torch._inductor.memory's
    estimate). The weights, the forward's inputs and the tangents are
    not counted (the graph frees none of them); nothing is compiled."""
    import contextlib
    import itertools

    import torch._inductor.config as inductor_config
    import torch._inductor.memory as memory
    from torch._inductor.compile_fx import compile_fx_inner

    found = []
    reorder = memory.reorder_for_peak_memory

    def read(nodes, name_to_buf, name_to_fused_node, graph_inputs, graph_outputs, **kwargs):
        order = reorder(nodes, name_to_buf, name_to_fused_node, graph_inputs, graph_outputs,
                        **kwargs)
        freeable = memory.prepare_planning_info(order, name_to_buf, name_to_fused_node,
                                                graph_inputs, graph_outputs)[1]
        steps = [0] * (len(order) + 2)
        for b in memory.compute_memory_timeline(order, freeable, graph_outputs)[0]:
            # An output (end_step -1) lives past the graph: the gradients.
            end = len(order) if b.end_step == -1 else b.end_step
            steps[b.start_step] += b.size_alloc
            steps[end + 1] -= b.size_free
        found.append(max(itertools.accumulate(steps)))
        raise _Scheduled()

    from torch._guards import detect_fake_mode

    inputs = [n.meta["val"] for n in bw.graph.nodes if n.op == "placeholder"]
    memory.reorder_for_peak_memory = read
    try:
        with inductor_config.patch(reorder_for_peak_memory=True), \
                detect_fake_mode(inputs) or contextlib.nullcontext():
            compile_fx_inner(bw, inputs, is_backward=True)
    except Exception as e:  # _Scheduled, or inductor's wrapper of it
        if not (isinstance(e, _Scheduled) or isinstance(e.__cause__, _Scheduled)
                or "_Scheduled" in str(e)):
            raise
    finally:
        memory.reorder_for_peak_memory = reorder
    return found[0] if found else None


def _created_bytes(bw):
    """Bytes of the backward graph's outputs (the gradients it makes),
    each memory once."""
    out = next(n for n in bw.graph.nodes if n.op == "output").args[0]
    bases = {}
    for n in out:
        if isinstance(n, torch.fx.Node):
            base = _base(n)
            if base.op not in ("placeholder", "get_attr"):
                bases[base.name] = _nbytes(base)
    return sum(bases.values())


class Partition:
    """One partitioned block: `saved` as saved_tensors gives it and
    `kept_bytes`, what the forward leaves alive for the backward: the
    saved tensors and the block's output, each memory once.
    `backward_transient_bytes`: the compiled backward's peak (backward_peak)
    less the saved tensors and the gradients it makes (None where
    inductor did not plan it)."""

    def __init__(self, saved, outputs, backward=None):
        self.saved = saved
        self.saved_bytes = sum(b for _, _, b in saved)
        held = {name: b for name, _, b in saved}
        held.update(outputs)
        self.kept_bytes = sum(held.values())
        self.backward_transient_bytes = self.backward_peak_bytes = None
        if backward is not None:
            peak = backward_peak(backward)
            if peak is not None:
                self.backward_peak_bytes = peak
                self.backward_transient_bytes = peak - self.saved_bytes - _created_bytes(backward)


def _tag_recompute(joint):
    """Tags the joint graph's forward ops as torch.compile tags a
    checkpointed region's (dynamo's tag_activation_checkpoint: one region,
    every op PREFER_RECOMPUTE), so that the partitioner recomputes them in
    the backward."""
    from torch.utils.checkpoint import CheckpointPolicy

    backward = set()
    for n in joint.graph.nodes:
        if (n.op == "placeholder" and n.name.startswith("tangents")) or any(
                a in backward for a in n.all_input_nodes):
            backward.add(n)
        elif n.op == "call_function":
            n.meta["ac_graph_id"] = 1
            n.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE


def _selective_tags(parts):
    """A dispatch mode that tags each op call's graph nodes as torch.compile
    tags a selective checkpoint's (torch.utils.checkpoint's
    _CachingTorchDispatchMode under AOTAutograd: the policy's decision in
    the node's "recompute", one "ac_graph_id"), with remat.apply's compiled
    policy for option `parts` (_selective.compiled_policy). Entered inside
    the traced call under fx_traceback.preserve_node_meta, as
    tag_activation_checkpoint runs a checkpointed region, so that the
    nodes the op makes (its decompositions included) take the tags."""
    import torch.fx.traceback as fx_traceback
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import SAC_IGNORED_OPS, SelectiveCheckpointContext

    from ._selective import compiled_policy

    class _NoScopes:  # attention_core decides by op alone
        types = {}

    decide = compiled_policy(parts, _NoScopes())

    class Tags(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func not in SAC_IGNORED_OPS:
                fx_traceback.current_meta["ac_graph_id"] = 1
                fx_traceback.current_meta["recompute"] = decide(
                    SelectiveCheckpointContext(is_recompute=False), func, *args, **kwargs)
            return func(*args, **kwargs)

    return Tags()


# The selective options a compiled trace partitions: the ones whose ops the
# compiled policy tells apart by the op alone (the module-scoped options,
# mlp_activation and norm_output, read dynamo's module stack, which a
# trace without dynamo does not have).
COMPILED_OPTIONS = ("attention_core",)


def _recomputed_costs(bw):
    """The OpCosts (remat._trace_meter) of the backward graph's calls that
    recompute forward ops: those that read no tangent, directly or through
    another call (every gradient op reads one), priced from their fake
    values; a call run_with_rng_state wraps (a seeded op recomputed with
    the forward's random state) is its op's."""
    from torch._prims.rng_prims import run_with_rng_state

    from ._trace_meter import _cost

    def val(a):
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

    grads = set()
    costs = []
    for n in bw.graph.nodes:
        if (n.op == "placeholder" and n.name.startswith("tangents")) or any(
                a in grads for a in n.all_input_nodes):
            grads.add(n)
            continue
        if n.op != "call_function":
            continue
        func, args = n.target, n.args
        if func is run_with_rng_state:
            func, args = args[1], args[2:]
        if not isinstance(func, torch._ops.OpOverload):
            continue
        args = torch.utils._pytree.tree_map(val, args)
        kwargs = torch.utils._pytree.tree_map(val, n.kwargs)
        out = n.meta.get("val")
        outs = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        costs.append(_cost(func, args, kwargs, out, outs))
    return costs


def partition_block(block, args, kwargs, hidden, checkpointed=False, selective=None):
    """The Partition of `block` called as block(*args, **kwargs) on fake
    tensors (under the tracer's FakeTensorMode) with grad on; hidden(out)
    is the tensor the block hands on (its one output the step uses).
    checkpointed: the block under a checkpoint (remat.apply's, compiled:
    non-reentrant), whose backward graph recomputes its forward.
    selective: the option's parts (COMPILED_OPTIONS) of remat.apply's
    selective checkpoint, compiled (its policy's tags, _selective_tags).
    The Partition's recompute_costs: the OpCosts of the forward ops its
    backward graph runs again."""
    from torch._functorch.aot_autograd import aot_function
    from torch._inductor.compile_fx import partition_fn
    from torch._inductor.decomposition import select_decomp_table
    from torch.utils._pytree import tree_flatten, tree_unflatten

    named = dict(block.named_parameters())
    named.update(dict(block.named_buffers()))
    names = list(named)
    leaves, spec = tree_flatten((args, kwargs))
    where = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]

    def call(*flat):
        weights = dict(zip(names, flat[:len(names)]))
        filled = list(leaves)
        for i, t in zip(where, flat[len(names):]):
            filled[i] = t
        a, kw = tree_unflatten(filled, spec)
        if selective is None:
            return hidden(torch.func.functional_call(block, weights, a, kw))
        import torch.fx.traceback as fx_traceback

        with fx_traceback.preserve_node_meta(), _selective_tags(selective):
            out = hidden(torch.func.functional_call(block, weights, a, kw))
        return out

    found = []

    def partition(joint, joint_inputs, **options):
        if checkpointed:
            _tag_recompute(joint)
        fw, bw = partition_fn(joint, joint_inputs, **options)
        part = Partition(saved_tensors(fw, bw), output_bases(fw, 1), bw)
        part.recompute_costs = _recomputed_costs(bw)
        found.append(part)
        return fw, bw

    compiled = aot_function(call, fw_compiler=lambda g, _: g, bw_compiler=lambda g, _: g,
                            partition_fn=partition, decompositions=select_decomp_table())
    flat = list(named.values()) + [leaves[i] for i in where]
    # Inductor's joint-graph passes read the fake mode torch.compile sets
    # (V.fake_mode: its random-op pass, for a block that draws, as dropout).
    from torch._guards import detect_fake_mode
    from torch._inductor.virtualized import V

    with V.set_fake_mode(detect_fake_mode(flat)):
        compiled(*flat)
    if not found:  # nothing needed a gradient: the forward keeps nothing
        empty = Partition([], {})
        empty.recompute_costs = []
        return empty
    return found[0]
