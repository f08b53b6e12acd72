"""Selective recompute of one block with PyTorch's selective activation
checkpoint (torch.utils.checkpoint.create_selective_checkpoint_contexts):
the block keeps (MUST_SAVE) what plain autograd would save for it, less the
plan's option's ops, and recomputes (PREFER_RECOMPUTE) the rest.

  attention_core  the attention's core: the score and context matmuls
                  (aten.bmm/baddbmm), the softmax, the fused attention
                  kernels (aten._scaled_dot_product_*) and the dropout of
                  the probabilities (its mask drawn again);
  mlp_activation  every op inside the block's MLP module except its
                  matmuls (GELU, SiLU and SwiGLU's product);
  norm_output     every op inside the block's norm modules;
  dropout_mask    the dropouts but the attention's inside SDPA (its math
                  path's, a fused kernel's): their masks drawn again;
  experts         every op inside a mixture of experts' experts module (the
                  MLP's `experts`: the dispatch, the grouped GEMMs, the
                  combine), its router's outputs kept.
What autograd saves comes from a recording pass (record): at the block's
first forward with grad for an input shape, the block's own forward runs
once more under a dispatch mode that logs each op call's output memory and
saved-tensor hooks that log the memory autograd saves, the random state
forked around it. The policy then decides by op call index, counted in the
forward and in the recompute alike; where the calls differ from the
recorded ones it falls back to the rules alone (every op outside the option
kept).
Views (view, transpose, expand, _unsafe_view, ...) are always
recomputed: they cost nothing, and a cached view would keep its base, a
recomputed op's output, alive; the op that made the base is kept when
autograd saves the view.
A dropout is one random draw: fused (aten.native_dropout on CUDA, a fused
attention kernel with dropout) or in place (PyTorch's CPU dropout and
SDPA's math path: empty_like, bernoulli_, div_, then a mul by the mask).
An in-place op is decided with the op that made the memory it changes, its
cache entry being that tensor as the forward left it
(allow_cache_entry_mutation), so an in-place draw is cached or drawn again
whole. A draw is drawn again where the option recomputes it: the
attention's (on the probabilities, or inside a fused kernel) under
attention_core, which also recomputes the mul applying it; the others under
dropout_mask (not SDPA's: its math path's mask is kept as the planner keeps
it, a fused kernel is the core). The rest are cached.
The random state: checkpoint restores the generator's state of the
forward's start before the recompute, which then draws again in order; a
cached draw does not run there, so it would not advance the generator and
every later draw would differ. A cached draw that a recomputed one follows
therefore has the generator's state after it captured in the forward
(at the policy's next call; CPU: torch.get_rng_state, 5,056 B; CUDA: the
Philox seed and offset) and set again in the recompute where the draw is
answered from the cache.
An op that changes memory from outside the block (its input, a buffer) is
kept.
The module scopes come from forward hooks on the MLP, experts and norm modules,
which fire again in the recording pass and the recompute.
In the recompute, a recomputed call whose output nothing the recompute
needs reads (eager attention's score ops before a kept softmax, when a
later norm is recomputed) returns a meta-device stand-in instead of
running (_unused_in_recompute, _skip_mode): SAC replays the forward in
order, and would otherwise run it.
"""
from ._blocks import mlp_of, norms_of
from ._segments import _error

_CORE = ("bmm", "baddbmm", "_softmax", "_safe_softmax", "softmax")
_CORE_PREFIX = ("_scaled_dot_product", "_efficient_attention", "_flash_attention")
_MATMUL = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv")


def _name(func):
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def _draws(func, args, kwargs):
    """Whether the op draws random numbers in this call."""
    import torch

    if torch.Tag.nondeterministic_seeded not in getattr(func, "tags", ()):
        return False
    schema = func._schema.arguments
    for position, arg in enumerate(schema):
        if arg.name in ("p", "dropout_p", "train"):
            value = args[position] if position < len(args) else kwargs.get(arg.name, arg.default_value)
            if value is not None and not value:
                return False
    return True


def _is_view(func, name):
    if name in ("_unsafe_view", "view", "reshape", "t", "transpose", "expand", "permute",
                "squeeze", "unsqueeze", "slice", "select", "split", "chunk", "unbind", "alias"):
        return True
    schema = getattr(func, "_schema", None)
    return bool(schema and not schema.is_mutable and schema.returns
                and all(r.alias_info is not None for r in schema.returns))


class Scopes:
    """Which of a block's MLP / norm modules is running (a depth count each),
    kept by forward hooks; remove() takes the hooks off again."""

    def __init__(self, block, parts, index):
        self.depth = {"mlp": 0, "norm": 0, "experts": 0}
        self.handles = []
        self.types = {}  # the watched modules' classes -> their scope (compiled_policy)
        if "experts" in parts:
            experts = getattr(mlp_of(block), "experts", None)
            if experts is None:
                raise _error(f"block{index} ({type(block).__name__}) has no experts module (the "
                             "MLP's experts, as Mixtral and Qwen3-MoE) for the selective option "
                             "experts")
            self._watch(experts, "experts")
        if "mlp_activation" in parts:
            mlp = mlp_of(block)
            if mlp is None:
                raise _error(f"block{index} ({type(block).__name__}) has no MLP module (mlp, "
                             "intermediate, ffn) for the selective option mlp_activation")
            self._watch(mlp, "mlp")
        if "norm_output" in parts:
            norms = norms_of(block)
            if not norms:
                raise _error(f"block{index} ({type(block).__name__}) has no norm module for "
                             "the selective option norm_output")
            for norm in norms:
                self._watch(norm, "norm")

    def _watch(self, module, scope):
        from torch.compiler import is_compiling

        self.types[type(module)] = scope

        # Under torch.compile the scopes are the traced module stack
        # (_TracedScopes): a count changed inside a compiled checkpoint
        # would be a side effect dynamo refuses.
        def enter(*_):
            if not is_compiling():
                self.depth[scope] += 1

        def leave(*_):
            if not is_compiling():
                self.depth[scope] -= 1

        self.handles.append(module.register_forward_pre_hook(enter))
        self.handles.append(module.register_forward_hook(leave, always_call=True))

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _is_core(name):
    """Whether an op is the attention's core (its matmuls, softmax, kernels)."""
    return name in _CORE or name.startswith(_CORE_PREFIX)


def _classify(func, args, kwargs, parts, scopes):
    """What the rules say of one op call under option `parts`: "view",
    "draw" (a random draw kept), "redraw" (a draw recomputed), "option"
    (one of the option's ops) or "other". The rules see one call: record
    decides a draw from what it draws for (_draw_groups)."""
    name = _name(func)
    if _is_view(func, name):
        return "view"  # free to redo; a cached view would pin its base
    if _draws(func, args, kwargs):
        if _is_core(name):  # a fused attention kernel with dropout
            return "redraw" if "attention_core" in parts else "draw"
        # In place (bernoulli_ into an empty_like): cached with the tensor
        # it fills, which later in-place ops finish; record decides it.
        return "redraw" if "dropout_mask" in parts and not func._schema.is_mutable else "draw"
    if "attention_core" in parts and _is_core(name):
        return "option"
    if scopes.depth["experts"] > 0:
        return "option"
    if scopes.depth["mlp"] > 0 and name not in _MATMUL:
        return "option"
    if scopes.depth["norm"] > 0:
        return "option"
    return "other"


def _storage(tensor):
    """A key for the memory a tensor lives in (None for no memory)."""
    storage = tensor.untyped_storage()
    return (tensor.device, storage.data_ptr()) if storage.nbytes() else None


def _recorder(parts, scopes):
    """A dispatch mode logging each op call as SAC sees it: (op, _classify's
    kind, [_storage of each tensor output with memory], [_storage of each
    tensor argument with memory], (shape, stride, dtype) of its output where
    that is one tensor, else None) in .calls; .held keeps the outputs;
    .sizes maps each output's _storage to its bytes."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.checkpoint import SAC_IGNORED_OPS

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls, self.held, self.sizes = [], [], {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in SAC_IGNORED_OPS:
                return func(*args, **kwargs)
            kind = _classify(func, args, kwargs, parts, scopes)
            out = func(*args, **kwargs)
            tensors = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            self.held.extend(tensors)
            storages = [_storage(t) for t in tensors]
            for t, key in zip(tensors, storages):
                if key is not None:
                    self.sizes[key] = t.untyped_storage().nbytes()
            inputs = [_storage(t) for t in tree_leaves((args, kwargs))
                      if isinstance(t, torch.Tensor)]
            meta = ((tuple(out.shape), out.stride(), out.dtype)
                    if isinstance(out, torch.Tensor) else None)
            self.calls.append((func, kind, [s for s in storages if s is not None],
                               [s for s in inputs if s is not None], meta))
            return out

    return Recorder()


class Decisions(list):
    """record's decisions, [(op name, keep, unused)] per op call, and
    `resync`: the indices of the cached draws that a recomputed draw
    follows, whose generator state after them the policy carries from the
    forward to the recompute."""
    resync = frozenset()


def record(run, hidden, parts, scopes):
    """The block's decisions (Decisions: [(op name, keep, unused)] per op
    call in the order the forward makes them; unused: the output's (shape,
    stride, dtype) where the recompute may skip the call,
    _unused_in_recompute, else None): `run(hidden)`, the block's own
    forward, once more
    with grad under a dispatch mode that logs each op call's outputs and
    saved-tensor hooks that log what autograd saves; the random state is
    restored after it and its outputs are dropped. Every output stays
    referenced until the end, so that no two tensors share an address.

    A call is kept (MUST_SAVE) when memory it creates is memory autograd
    saves, no less of it than of the memory it creates that autograd does
    not save (a cache entry holds all a call returns), and the call is not
    one of the option's ops, or when the memory
    holds a kept random draw; the calls that later change that memory in
    place are decided with the call that created it (a cache entry is the
    tensor as the forward left it). Views and the rest are recomputed;
    calls changing memory from outside the block are kept (recomputing them
    would change it twice). Draws are decided by what they draw for
    (_draw_kinds)."""
    import torch

    autograd_saves = set()

    def pack(tensor):  # the key only: a packed tensor would keep its graph alive
        autograd_saves.add(_storage(tensor))

    recorder = _recorder(parts, scopes)
    device = hidden.device
    with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device],
                               device_type=device.type):
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda _: None):
            with recorder:
                run(hidden)
    drawing = [kind in ("draw", "redraw") for _, kind, _, _, _ in recorder.calls]
    recorder.held = []  # the sizes stay: keys of memory the calls made
    creator = {}  # storage -> index of the call that created it
    chains = []  # per call: the index deciding it
    for index, (func, kind, storages, _, _) in enumerate(recorder.calls):
        known = [creator[s] for s in storages if s in creator]
        if kind == "view" or not storages:
            chains.append(None)
        elif known:
            chains.append(known[0])
        elif func._schema.is_mutable:
            chains.append(-1)  # memory from outside the block
        else:
            for s in storages:
                creator[s] = index
            chains.append(index)
    kinds = _draw_kinds(recorder.calls, chains, drawing, parts)
    calls = [(func, kinds[i], storages, inputs, meta)
             for i, (func, _, storages, inputs, meta) in enumerate(recorder.calls)]
    keep = {}
    for index, (func, kind, storages, _, _) in enumerate(calls):
        root = chains[index]
        if root is None or root < 0:
            continue
        if kind == "draw":
            keep[root] = True
        elif index == root:
            # Caching a call keeps all it returns: it pays where what autograd
            # saves of it is at least what it does not (a LayerNorm whose
            # output no op saves, a post-LN block's last, keeps its statistics
            # only by running again).
            saved = sum(recorder.sizes[s] for s in storages if s in autograd_saves)
            unsaved = sum(recorder.sizes[s] for s in storages if s not in autograd_saves)
            saved_here = saved > 0 and saved >= unsaved
            keep.setdefault(root, saved_here and kind not in ("option", "redraw"))
    kept = [root is not None and (root < 0 or keep[root]) for root in chains]
    unused = _unused_in_recompute(calls, kept, autograd_saves)
    decisions = Decisions((_name(func), kept[index], meta if unused[index] else None)
                          for index, (func, _, _, _, meta) in enumerate(calls))
    # A cached draw does not advance the generator in the recompute: where a
    # recomputed draw follows it, the state after it is carried over.
    draws = [i for i, d in enumerate(drawing) if d]
    decisions.resync = frozenset(i for i in draws if kept[i] and
                                 any(not kept[j] for j in draws if j > i))
    return decisions


def _draw_kinds(calls, chains, drawing, parts):
    """Per call, its kind with the draws decided by what they draw for. A
    draw's group is the call that made its memory (an in-place draw's
    empty_like, a fused dropout itself) and the calls changing that memory;
    it draws for the group's first call's inputs. A group drawing for the
    attention's probabilities (memory a core op made) is the attention's
    dropout: drawn again under attention_core, which also recomputes the
    calls applying its mask (the mul), and under dropout_mask unless SDPA's
    math path drew it (on _safe_softmax's output: the planner keeps that
    mask); a fused attention kernel is decided by _classify; the other
    groups are drawn again under dropout_mask. A group drawn again is
    recomputed whole ("redraw"), a cached one keeps its draws ("draw")."""
    kinds = [kind for _, kind, _, _, _ in calls]
    made_by, core = {}, set()  # storage -> the op that made it; memory of core ops
    for index, (func, _, storages, _, _) in enumerate(calls):
        name = _name(func)
        if chains[index] == index:
            for s in storages:
                made_by.setdefault(s, name)
        if _is_core(name):
            core.update(storages)
    roots = sorted({chains[i] for i, d in enumerate(drawing)
                    if d and chains[i] is not None and chains[i] >= 0})
    for root in roots:
        func, _, storages, drawn_for, _ = calls[root]
        if _is_core(_name(func)):
            continue  # a fused attention kernel: the core itself
        attention = any(s in core for s in drawn_for)
        if attention:
            math = any(made_by.get(s) == "_safe_softmax" for s in drawn_for)
            again = "attention_core" in parts or ("dropout_mask" in parts and not math)
        else:
            again = "dropout_mask" in parts
        group = [i for i, r in enumerate(chains) if r == root]
        for i in group:
            if drawing[i] or again:
                kinds[i] = "redraw" if again else "draw"
        if attention and again and "attention_core" in parts:
            for i in range(root + 1, len(calls)):
                if chains[i] not in (None, root) and any(s in storages for s in calls[i][3]):
                    kinds[i] = "option"  # the mask applied: dropped with the core
                    core.update(calls[i][2])
    return kinds


def _unused_in_recompute(calls, kept, autograd_saves):
    """Per call: whether the recompute may skip it, its output standing in
    for nothing. PyTorch's selective checkpoint replays the block's forward
    in order, so a recomputed call runs there even where nothing needs its
    output: eager attention's q.kT matmul, scaling and mask add before a
    kept softmax (sequence-squared tensors) when a later norm is
    recomputed. A recomputed call is needed when memory it writes is saved
    by autograd or read by a needed call; kept calls come from the cache
    and need nothing. Calls that draw, change memory in place, or return
    other than one tensor are always run (their inputs needed)."""
    needed = set(autograd_saves)
    unused = [False] * len(calls)
    for index in range(len(calls) - 1, -1, -1):
        func, kind, storages, inputs, meta = calls[index]
        if kept[index]:
            continue
        skippable = (meta is not None and storages and kind not in ("draw", "redraw")
                     and not func._schema.is_mutable)
        if skippable and not any(s in needed for s in storages):
            unused[index] = True
        else:
            needed.update(inputs)
    return unused


def policy(parts, scopes, decisions=None, skip=None):
    """The SAC policy function for one checkpoint call of a block under
    option `parts`: decisions[i] (from record) for the i-th op call of the
    forward and of the recompute alike (a counter each); without decisions,
    or where the calls differ from the recorded ones, the rules alone, every
    "other" op kept. A recompute call record found unused is handed to
    `skip` (_skip_mode: the op's output without memory), until the first
    call that differs from the recorded ones. For a cached draw in
    decisions.resync, the forward's next call captures the generator's
    state (the draw has run), and the recompute sets it where SAC answers
    the draw from its cache."""
    from torch.utils.checkpoint import CheckpointPolicy

    count = {False: 0, True: 0}
    cached_draws = []
    diverged = [False]
    resync = getattr(decisions, "resync", frozenset())
    states = {}  # resync draw index -> the generator's state after it
    capture = []  # (index, device) of the resync draw the forward just ran

    def decide(ctx, func, *args, **kwargs):
        index = count[ctx.is_recompute]
        count[ctx.is_recompute] += 1
        name = _name(func)
        if capture and not ctx.is_recompute:
            draw, device = capture.pop()
            states[draw] = _rng_state(device)
        if (decisions is not None and not diverged[0] and index < len(decisions)
                and decisions[index][0] == name):
            _, keep, unused = decisions[index]
            if unused is not None and ctx.is_recompute and skip is not None:
                skip.next = unused
            if index in resync:
                device = _device_of(args, kwargs)
                if not ctx.is_recompute:
                    capture.append((index, device))
                elif index in states:
                    _set_rng_state(device, states.pop(index))
        else:
            diverged[0] = True
            kind = _classify(func, args, kwargs, parts, scopes)
            keep = kind in ("draw", "other")
            if kind == "draw":
                cached_draws.append(name)
            elif kind == "redraw" and cached_draws and not ctx.is_recompute:
                raise _error(
                    f"selective option {'+'.join(parts)}: this block draws ({cached_draws[0]}, "
                    f"kept) before a dropout it would draw again ({name}), in calls other than "
                    "the recorded ones: the recompute would draw other numbers; plan without "
                    "this option for this model")
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return decide


def _device_of(args, kwargs):
    """The device of an op call's first tensor argument."""
    import torch
    from torch.utils._pytree import tree_leaves

    return next((t.device for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)),
                torch.device("cpu"))


def _rng_state(device):
    """The state of `device`'s default generator (a CPU tensor)."""
    import torch

    if device.type == "cpu":
        return torch.get_rng_state()
    return torch.get_device_module(device.type).get_rng_state(device)


def _set_rng_state(device, state):
    import torch

    if device.type == "cpu":
        torch.set_rng_state(state)
    else:
        torch.get_device_module(device.type).set_rng_state(state, device)


def _skip_mode():
    """A dispatch mode under SAC's recompute mode: the op call the policy
    just marked (.next: its output's shape, stride, dtype) returns a tensor
    of that shape and stride on the meta device (no memory) instead of
    running. Only unused calls and views of them see it: the calls that
    read their outputs are unused too, or kept (SAC's cache answers them
    without running), so nothing computes with it; its strides are the
    real ones so that composite ops (reshape, matmul) take the recorded
    path."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Skip(TorchDispatchMode):
        next = None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            meta, self.next = self.next, None
            if meta is None:
                return func(*args, **(kwargs or {}))
            shape, stride, dtype = meta
            return torch.empty_strided(shape, stride, dtype=dtype, device="meta")

    return Skip()


class _TracedScopes:
    """Scopes of the op call torch.compile traces: the module stack dynamo
    recorded for it (the fx node's nn_module_stack, which AOTAutograd
    carries while it traces a checkpointed region), matched by the watched
    modules' classes; module hooks do not run there."""

    def __init__(self, scopes, stack):
        self.depth = {"mlp": 0, "norm": 0, "experts": 0}
        for value in stack.values():
            scope = scopes.types.get(value[1] if isinstance(value, tuple) else None)
            if scope is not None:
                self.depth[scope] += 1


def compiled_policy(parts, scopes):
    """The SAC policy under torch.compile, where AOTAutograd traces the
    checkpointed region once and its partitioner makes the recompute: the
    option's ops and views PREFER_RECOMPUTE, a draw the option draws again
    too, every other op PREFER_SAVE: the partitioner saves what the
    backward reads of it, and may still recompute the cheap ones as it does
    without a checkpoint (MUST_SAVE forbids that: bench/compile/kept.py
    measured the blocks' saved tensors above the plain compiled block's).
    No recorded decisions: the traced calls are not eager's."""
    import torch.fx.traceback as fx_traceback
    from torch.utils.checkpoint import CheckpointPolicy

    def decide(ctx, func, *args, **kwargs):
        stack = (fx_traceback.get_current_meta() or {}).get("nn_module_stack") or {}
        kind = _classify(func, args, kwargs, parts, _TracedScopes(scopes, stack))
        keep = kind in ("draw", "other")
        return CheckpointPolicy.PREFER_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return decide


def compiled_context_fn(parts, scopes):
    """checkpoint's context_fn under torch.compile (compiled_policy); made
    before compile traces it, as dynamo takes a context_fn defined outside
    the region it compiles."""

    def contexts():
        from torch.utils.checkpoint import create_selective_checkpoint_contexts

        return create_selective_checkpoint_contexts(compiled_policy(parts, scopes),
                                                    allow_cache_entry_mutation=True)

    return contexts


def context_fn(parts, scopes, decisions=None):
    """checkpoint's context_fn for the option: fresh counters per call; the
    recompute skips the calls record found unused (_skip_mode, entered
    before SAC's mode so that SAC's call of the op reaches it). Eager only:
    under torch.compile, compiled_context_fn."""
    import contextlib

    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def contexts():
        skip = _skip_mode()
        forward, recompute = create_selective_checkpoint_contexts(
            policy(parts, scopes, decisions, skip), allow_cache_entry_mutation=True)

        @contextlib.contextmanager
        def both():
            with skip, recompute:
                yield

        return forward, both()

    return contexts
