"""remat.apply(model, plan) / remat.unapply(model): a plan carried out on
the user's own PyTorch model with PyTorch's own mechanisms.

    plan = remat.plan("config.json", budget="24GB", micro_batch=8, seq_len=2048)
    remat.apply(model, plan)      # model: HF / PEFT / sentence-transformers / own
    loss = model(**batch).loss; loss.backward()
    remat.unapply(model)          # the original forwards, exactly

Each block's `forward` is replaced on the instance (the class is untouched):
  checkpoint + recompute blocks: one torch.utils.checkpoint.checkpoint
      (use_reentrant=False) over the segment: its first block runs the
      segment's blocks in sequence, each with the arguments the model gave
      the first (the later blocks' own arguments must be the same objects:
      they are checked when the model calls them, and they return the
      segment's output unchanged); inside it each block runs as the plan's
      schedule recomputes it (_segments.plan_segments): keeping
      everything, selectively, or inside a nested checkpoint where the
      schedule regenerates a checkpoint without grad (multi-level);
      blocks of different structures (gpt-oss's sliding-window and full
      attention, ModernBERT's local and global layers), which models give
      different masks: each block runs in its own call with its own
      arguments, all under one non-reentrant checkpoint opened by the
      first and closed by the last (PyTorch's generator form of it), whose
      recompute runs the blocks again with the arguments each was given
      and the random state each started with (_Deferred);
  offload: the same, its checkpoint under saved-tensor hooks that keep the
      segment's input in host memory from its forward until the backward
      reaches the checkpoint after it, as the plan's schedule prefetches it
      (_offload: pinned memory and a side stream on CUDA; on a CPU a
      buffer outside PyTorch's allocator);
  selective: checkpoint with a selective-checkpoint context_fn (_selective),
      from a recording pass of the block at its first forward with grad for
      an input shape;
  keep: untouched;
  checkpoint on the embedding (then `recompute` blocks): the embedding's
      forward records its arguments and returns a placeholder (its
      output's shape and dtype in one element of memory); the segment's
      first block ignores it and its checkpoint runs the embedding, then
      the blocks, so only the token ids are kept and the gradient reaches
      the embedding's weights through the recompute. block0 must get the
      placeholder itself (a model that changes the embedding's output
      before the first block is refused at its first forward).
  checkpoint on the final norm: the norm's forward under a checkpoint of
      its own (its input kept); recompute on it: the last blocks' segment
      runs the norm last, its checkpoint returns the last block's output
      (which the last block returns) and the norm's (which the norm's
      forward returns, given the last block's output as it was returned);
      recompute on the head after it: the segment runs the head too
      (_tail.Tail).
  the plan's chunked loss (job.loss_chunks N): on a transformers causal LM,
      the head and its loss over N chunks of the tokens, the gradients made
      in the forward (_lm_head, _chunked_loss); the model returns the loss
      and no logits in a forward with labels.
A multi-pass plan (layers p1.block0.., p2.block0..: sentence-transformers
running the same modules once per text column group) gives each pass its
own forwards: the model's forwards with grad are its passes in turn,
counted from the first after apply by a pre-hook on the embedding or
block0.
FSDP2: where a segment's blocks are fully_shard units of their own (before
or after apply), the segment runs each block's forward between its unit's
pre- and post-forward (as torch.distributed.fsdp.
register_fsdp_forward_method runs a method), and the blocks' module hooks
are removed while applied (unapply registers them again): each block is
gathered as it computes (again when the recompute reaches it), resharded
after, its pre-backward registered on its own output, and its gradients
reduced by its own unit. A unit of several blocks (fully_shard([...]))
keeps its module hooks.
The plan's shape (micro-batch, sequence length, hidden size) is checked
against the first block's input at the first forward with grad; a
recomputed block given a KV cache is refused (train with use_cache=False).
"""
import contextlib
import inspect
import json
import os

from ._blocks import find_blocks, find_embedding, find_final_norm, find_head
from ._lm_head import ChunkedHead, find_causal_lm
from ._offload import HostQueue
from ._planner import EXIT_BAD_INPUT, InputError
from ._segments import _nodes, plan_segments
from ._selective import Scopes, compiled_context_fn, context_fn, record
from ._tail import Tail

_STATE = "_remat_applied"


def _plan_json(plan):
    if hasattr(plan, "json"):
        return plan.json
    if isinstance(plan, dict):
        return plan
    if isinstance(plan, (str, os.PathLike)):
        try:
            with open(plan) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise InputError(f"remat.apply: cannot read plan {os.fspath(plan)}: {e}", EXIT_BAD_INPUT)
    raise InputError("remat.apply: plan must be a remat.Plan, a plan.json dict or its path, "
                     f"not {type(plan).__name__}", EXIT_BAD_INPUT)


def _hidden(output):
    """The hidden state in a block's output (a tensor, or its first item)."""
    return output if not isinstance(output, (tuple, list)) and not hasattr(output, "keys") else output[0]


def _with_hidden(args, kwargs, hidden):
    if args:
        return (hidden,) + tuple(args[1:]), kwargs
    return args, dict(kwargs, hidden_states=hidden)


def _input(args, kwargs):
    return args[0] if args else kwargs.get("hidden_states")


_CACHE_NAMES = ("cache", "past_key_values", "past_key_value", "layer_past")


def _refuse_cache(original, index, args, kwargs):
    """A recomputed block must not write a KV cache: its recompute would
    write it again (transformers turns the cache off under its own
    checkpointing for the same reason)."""
    try:
        bound = inspect.signature(original).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = kwargs
    if any(bound.get(name) is not None for name in _CACHE_NAMES):
        raise InputError(
            f"remat.apply: block{index} is recomputed but got a KV cache (use_cache): the "
            "recompute would write it again; train with use_cache=False (model.config."
            "use_cache = False)", EXIT_BAD_INPUT)


def _same(a, b):
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    try:
        return a is b or bool(a == b)
    except Exception:  # objects without a plain ==: identity only
        return False


class _Selective:
    """One block under a selective option: its scopes and its recorded
    decisions per input (shape, dtype, device, autocast)."""

    def __init__(self, original, index, parts, scopes):
        self.original, self.index, self.parts, self.scopes = original, index, parts, scopes
        self.records = {}
        self.compiled = compiled_context_fn(parts, scopes)  # made outside what dynamo traces

    def __call__(self, hidden, args, kwargs, selective=True, forward=None):
        """The block's output, under a selective checkpoint (grad on); with
        selective False under a plain one, which saves the same tensors to
        an enclosing checkpoint and caches nothing. forward: the block's
        forward as its segment runs it (_Segment.forward_of)."""
        import torch
        from torch.utils.checkpoint import checkpoint

        if forward is None:  # (not `or`: dynamo cannot branch on a function's truth)
            forward = self.original

        def run(h):
            a, k = _with_hidden(args, kwargs, h)
            return forward(*a, **k)

        if not selective:
            return checkpoint(run, hidden, use_reentrant=False)
        if torch.compiler.is_compiling():  # traced once: no recording pass, the partitioner recomputes
            return checkpoint(run, hidden, use_reentrant=False, context_fn=self.compiled)
        key = (tuple(hidden.shape), hidden.dtype, hidden.device, torch.is_autocast_enabled())
        if key not in self.records:
            self.records[key] = record(run, hidden, self.parts, self.scopes)
        return checkpoint(run, hidden, use_reentrant=False,
                          context_fn=context_fn(self.parts, self.scopes, self.records[key]))


def _own_unit(module):
    """The FSDP2 state of `module` where it is a fully_shard unit of its
    own, else None."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return None
    if not isinstance(module, FSDPModule):
        return None
    state = module._get_fsdp_state()
    modules = getattr(state, "_modules", ())
    return state if len(modules) == 1 and modules[0] is module else None


def _attach(fsdp, module):
    """Registers a unit's module hooks again, as fully_shard registers them."""
    if _own_unit(module) is fsdp:
        fsdp._pre_forward_hook_handle = module.register_forward_pre_hook(
            fsdp._pre_forward, prepend=True, with_kwargs=True)
        fsdp._post_forward_hook_handle = module.register_forward_hook(
            fsdp._post_forward, prepend=False)


def _first_tensor(args, kwargs):
    import torch

    return next((x for x in list(args) + list(kwargs.values()) if isinstance(x, torch.Tensor)),
                None)


class _Segment:
    """One recompute segment's blocks and the state between their calls.
    children: what its recompute runs (Segments, _segments), selectives:
    a _Selective per selective child block. A segment starting at the
    embedding (seg.start -1) runs the embedding first, with the arguments
    its _Embedding recorded in this forward (embedded). A segment ending
    past the blocks (position tail_at, the number of blocks: the final norm,
    then the head) runs them last: its checkpoint returns the last block's
    output and the segment's last output, which the last block and the
    tail's modules (_tail.Tail) return."""

    def __init__(self, blocks, originals, seg, checker, selectives, embedding=None,
                 tail=None, tail_at=None, detached=None, queue=None):
        self.blocks, self.originals, self.kind = blocks, originals, seg.kind
        self.queue = queue  # the pass's HostQueue where it offloads
        self.lo, self.start = seg.start, max(seg.start, 0)
        self.children, self.selectives = seg.children, selectives
        self.checker, self.embedding = checker, embedding
        self.tail, self.tail_at = tail, tail_at
        self.embedded = None  # (args, kwargs, placeholder) of the embedding's call
        self.pending = None  # (next block, output, hidden, args, kwargs) within one forward
        # FSDP2: each block's own unit (_own_unit) whose module hooks were
        # removed; detached: the applied state's list of them, for unapply.
        self.units, self.detached = [None] * len(blocks), detached
        self.entered = False  # block0's module pre-forward ran in this call
        self.detach()
        self.deferred = self.deferrable()  # whether it runs as a _Deferred
        self.open = None  # the _Deferred of the forward under way
        self.own_calls = False  # this forward calls each block itself (deferred, not compiled)

    def detach(self):
        """Removes the module hooks of the blocks that are FSDP2 units of
        their own where the segment spans several blocks (their forwards run
        inside the first block's call: forward_of runs each between its
        unit's hooks). Returns whether block0's were still attached: its
        pre-forward then ran for the call under way (fully_shard after
        apply)."""
        entered = False
        if len(self.blocks) < 2:
            return entered
        for j, block in enumerate(self.blocks):
            fsdp = self.units[j] = _own_unit(block)
            if fsdp is None or fsdp._pre_forward_hook_handle.id not in block._forward_pre_hooks:
                continue
            fsdp._pre_forward_hook_handle.remove()
            fsdp._post_forward_hook_handle.remove()
            if self.detached is not None:
                self.detached.append((fsdp, block))
            entered = entered or j == 0
        return entered

    def deferrable(self):
        """Whether the segment runs as a _Deferred: plain blocks (no
        selective, nested or offloaded part, no embedding or final norm in
        it, no FSDP2 unit of its own) of different structures."""
        if len(self.blocks) < 2 or self.kind != "checkpoint" or self.lo < 0 or \
                self.queue is not None or self.past_blocks(self.children):
            return False
        if any(c.kind != "keep" or c.children for c in self.children):
            return False
        if any(_own_unit(b) is not None for b in self.blocks):
            return False
        from ._trace_chain import _structures

        return len(set(_structures(self.blocks))) > 1

    def forward_of(self, j):
        """Block start+j's forward as the segment runs it: between its own
        FSDP2 unit's pre- and post-forward where it is one."""
        fsdp, original = self.units[j], self.originals[j]
        if fsdp is None:
            return original
        module = self.blocks[j]

        def forward(*args, **kwargs):
            if j == 0 and self.entered:
                self.entered = False
            else:
                args, kwargs = fsdp._pre_forward(module, args, kwargs)
            return fsdp._post_forward(module, args, original(*args, **kwargs))

        return forward

    def past_blocks(self, children):
        """Whether `children` end past the blocks (at the final norm or head)."""
        return self.tail_at is not None and bool(children) and children[-1].stop > self.tail_at

    def checkpointed(self, children, args, kwargs, call=None):
        """The function a checkpoint over `children` runs: its first call is
        the forward, which keeps nothing, so a selective child runs there
        under a plain checkpoint (a selective one would cache its kept
        tensors until the recompute); later calls are recomputes, where it
        runs selectively. call: the embedding's (args, kwargs), where the
        children start at it (their input is then unused)."""
        import torch

        calls = [0]

        past_blocks = self.past_blocks(children)

        def run(hidden):
            # Under torch.compile the region is traced once and the
            # partitioner makes its recompute: no call counts as one.
            if not torch.compiler.is_compiling():
                calls[0] += 1
            block, output = self.run_children(children, hidden, args, kwargs, calls[0] > 1, call)
            return (block, output) if past_blocks else output

        return run

    def run_children(self, children, hidden, args, kwargs, recompute, call=None):
        """Each child in order: keep blocks as they are, selective blocks
        under their selective checkpoint (in a recompute), nested segments
        under a checkpoint of their own. Returns (the last block's output,
        the last child's output): they differ where the final norm (and the
        head) run last."""
        from torch.utils.checkpoint import checkpoint

        block = output = None
        for child in children:
            if child.kind == "keep":
                for i in range(child.start, child.stop):
                    if i < 0:
                        output = self.embedding(*call[0], **call[1])
                    elif i == self.tail_at:
                        output = self.tail.norm(hidden)
                    elif self.tail_at is not None and i == self.tail_at + 1:
                        output = self.tail.head(hidden)
                    else:
                        a, k = _with_hidden(args, kwargs, hidden)
                        output = block = self.forward_of(i - self.start)(*a, **k)
                    hidden = _hidden(output)
                continue
            if child.kind == "selective":
                output = block = self.selectives[child.start](
                    hidden, args, kwargs, recompute, self.forward_of(child.start - self.start))
            else:
                run = self.checkpointed(child.children, args, kwargs,
                                        call if child.start < 0 else None)
                output = checkpoint(run, _first_tensor(*call) if child.start < 0 else hidden,
                                    use_reentrant=False)
                if self.past_blocks(child.children):
                    block, output = output
                else:
                    block = output
            hidden = _hidden(output)
        return block, output

    def run_plain(self, hidden, args, kwargs):
        output = None
        for j in range(len(self.originals)):
            a, k = _with_hidden(args, kwargs, hidden)
            output = self.forward_of(j)(*a, **k)
            hidden = _hidden(output)
        return output

    def first(self, *args, **kwargs):
        import torch
        from torch.utils.checkpoint import checkpoint

        if self.open is not None:  # a forward that stopped inside the segment
            self.open, deferred = None, self.open
            deferred._close()
        # (Under torch.compile: the checkpoint's function form, below.)
        self.own_calls = self.deferred and not torch.compiler.is_compiling() and \
            not any(_own_unit(b) is not None for b in self.blocks)  # fully_shard after apply
        if self.own_calls and torch.is_grad_enabled():
            hidden = _input(args, kwargs)
            self.checker(self.start, hidden)
            _refuse_cache(self.originals[0], self.start, args, kwargs)
            self.open = _Deferred(self.originals, self.start)
            return self.open.run(0, args, kwargs)
        if self.own_calls:  # without grad: each block as it is
            return self.originals[0](*args, **kwargs)
        hidden = _input(args, kwargs)
        self.checker(self.start, hidden)
        self.device = hidden.device
        self.entered = self.detach()
        if torch.is_grad_enabled():
            _refuse_cache(self.originals[0], self.start, args, kwargs)
            call, start = None, hidden
            if self.lo < 0:
                embedded, self.embedded = self.embedded, None
                if embedded is None or hidden is not embedded[2]:
                    raise InputError(
                        "remat.apply: the plan checkpoints the embedding with block0, and "
                        "block0's input is not the embedding's output as it returned it (the "
                        "model changes it in between, or was given inputs_embeds); plan "
                        "without a checkpoint on the embedding", EXIT_BAD_INPUT)
                call = embedded[:2]
                start = _first_tensor(*call)
            if self.kind == "offload":
                # The recompute gets its input from the checkpoint (from host
                # memory): the arguments it keeps must not hold it too.
                args, kwargs = _with_hidden(args, kwargs, None)
            run = self.checkpointed(self.children, args, kwargs, call)
            with (self.queue.hooks(self.device, self.kind == "offload") if self.queue is not None
                  else contextlib.nullcontext()):
                output = checkpoint(run, start, use_reentrant=False)
            if self.past_blocks(self.children):
                output, result = output
                self.tail.ran(_hidden(output), result)
        else:
            output = self.run_plain(hidden, args, kwargs)
        if len(self.originals) > 1:
            self.pending = (1, output, args, kwargs)
        return output

    def later(self, position):
        def forward(*args, **kwargs):
            import torch

            index = self.start + position
            if self.open is not None:
                deferred = self.open
                if position + 1 == len(self.originals):
                    self.open = None
                return deferred.run(position, args, kwargs)
            if self.own_calls and not torch.is_grad_enabled():
                return self.originals[position](*args, **kwargs)
            if self.pending is None or self.pending[0] != position:
                raise InputError(
                    f"remat.apply: block{index} ran outside its recompute segment (block"
                    f"{self.start} runs blocks {self.start}..{self.start + len(self.originals) - 1}"
                    "); the model does not call its blocks once each, in order", EXIT_BAD_INPUT)
            _, output, first_args, first_kwargs = self.pending
            fed = _input(args, kwargs)
            a, k = _with_hidden(args, kwargs, _hidden(output))
            f_a, f_k = _with_hidden(first_args, first_kwargs, _hidden(output))
            if fed is not _hidden(output) or not (_same(a, f_a) and _same(k, f_k)):
                self.pending = None
                raise InputError(
                    f"remat.apply: block{index} gets other arguments than block{self.start}, "
                    "which starts its recompute segment (per-layer masks or caches?); plan "
                    "with segments that do not span such blocks (strategy selective or manual)",
                    EXIT_BAD_INPUT)
            self.pending = None if position + 1 == len(self.originals) else (position + 1,) + self.pending[1:]
            return output

        return forward


class _Deferred:
    """One forward of a segment whose blocks each run in their own call
    with their own arguments: the first call opens PyTorch's non-reentrant
    checkpoint (torch.utils.checkpoint's generator form, which the
    function form runs within one call) and the last closes it, so what
    the blocks save in between is recomputed in the backward, from the
    segment's input, by `replay`: each block again with the arguments it
    was given (the hidden state aside: the previous block's output), the
    later ones with the random state they started with (the model may draw
    between blocks: a layerdrop's torch.rand). A later block given a
    tensor made with grad (T5's position bias, from block0) is refused: its
    recompute would not make it again."""

    def __init__(self, originals, start):
        self.originals, self.start = originals, start
        self.calls = []  # (args, kwargs) without the hidden state, per block
        self.states = []  # the CPU random state at each later block's call
        self.gen = None

    def run(self, position, args, kwargs):
        import torch
        from torch.utils.checkpoint import _checkpoint_without_reentrant_generator

        if len(self.calls) != position:
            raise InputError(
                f"remat.apply: block{self.start + position} ran outside its recompute segment "
                f"(block{self.start} runs blocks {self.start}..{self.start + len(self.originals) - 1}"
                "); the model does not call its blocks once each, in order", EXIT_BAD_INPUT)
        hidden = _input(args, kwargs)
        rest = _with_hidden(args, kwargs, None)
        if position == 0:
            self.calls.append(rest)
            self.gen = _checkpoint_without_reentrant_generator(
                self.replay, True, _noop_contexts, "default", False, True, hidden)
            next(self.gen)
        else:
            first = self.calls[0]
            for value in _tensors(rest):
                if value.grad_fn is not None and not any(value is v for v in _tensors(first)):
                    self._close()
                    raise InputError(
                        f"remat.apply: block{self.start + position} gets a tensor made with grad "
                        f"that block{self.start}, which starts its recompute segment, does not "
                        "get (a position bias handed from block to block?); plan with segments "
                        "that do not span such blocks (strategy selective or manual)",
                        EXIT_BAD_INPUT)
            self.calls.append(rest)
            self.states.append(torch.get_rng_state())
        try:
            output = self.originals[position](*args, **kwargs)
        except BaseException:
            self._close()
            raise
        if position + 1 == len(self.originals):
            self._close()
        return output

    def _close(self):
        gen, self.gen = self.gen, None
        if gen is not None:
            try:
                next(gen)
            except StopIteration:
                pass

    def replay(self, hidden):
        import torch

        output = None
        for j, original in enumerate(self.originals):
            if j > 0:
                torch.set_rng_state(self.states[j - 1])
            a, k = _with_hidden(*self.calls[j], hidden)
            output = original(*a, **k)
            hidden = _hidden(output)
        return output


def _noop_contexts():
    import contextlib

    return contextlib.nullcontext(), contextlib.nullcontext()


def _tensors(call):
    import torch
    from torch.utils._pytree import tree_leaves

    return [v for v in tree_leaves(call) if isinstance(v, torch.Tensor)]


def _alone(original):
    """A module's forward under a checkpoint of its own (with grad): a
    segment that is the embedding alone, keeping its input only."""

    def forward(*args, **kwargs):
        import torch
        from torch.utils.checkpoint import checkpoint

        if not torch.is_grad_enabled():
            return original(*args, **kwargs)
        return checkpoint(original, *args, use_reentrant=False, **kwargs)

    return forward


class _Embedding:
    """The embedding's forward in a pass whose first segment starts at it
    and holds blocks (runner). With grad: records its arguments on the
    runner and returns a placeholder, a tensor of its output's shape and
    dtype in one element of memory, which the segment's first block takes
    as its input and ignores (the checkpoint there runs the embedding);
    computed without grad, the random state forked around it, only for its
    shape."""

    def __init__(self, original, runner):
        self.original, self.runner = original, runner

    def __call__(self, *args, **kwargs):
        import torch

        if not torch.is_grad_enabled():
            return self.original(*args, **kwargs)
        ids = _first_tensor(args, kwargs)
        device = ids.device if ids is not None else torch.device("cpu")
        with torch.no_grad(), torch.random.fork_rng(
                devices=[] if device.type == "cpu" else [device], device_type=device.type):
            output = self.original(*args, **kwargs)
        if not isinstance(output, torch.Tensor):
            raise InputError(
                f"remat.apply: the plan checkpoints the embedding, whose output is a "
                f"{type(output).__name__}, not a tensor; plan without a checkpoint on the "
                "embedding", EXIT_BAD_INPUT)
        placeholder = output.new_zeros(()).expand(output.shape)
        self.runner.embedded = (args, kwargs, placeholder)
        return placeholder


class _Applied:
    """What apply changed on a model: the modules' own forwards (the
    instance attribute when one was set, else None), the hooks added, and
    the pass the model is in (a multi-pass plan's passes are the model's
    forwards with grad, in turn)."""

    def __init__(self, modules, passes):
        self.modules = modules
        self.saved = [m.__dict__["forward"] if "forward" in m.__dict__ else None for m in modules]
        self.scopes, self.handles = [], []
        self.detached = []  # (FSDP2 state, block) whose module hooks a segment removed
        self.head = None  # the chunked loss (_lm_head.ChunkedHead) where the plan has one
        self.checked = set()  # the passes whose input shape was checked
        self.passes, self.current = passes, passes - 1

    def restore(self):
        for module, forward in zip(self.modules, self.saved):
            if forward is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = forward
        for scopes in self.scopes:
            scopes.remove()
        for handle in self.handles:
            handle.remove()
        for fsdp, module in self.detached:
            _attach(fsdp, module)
        self.detached = []
        if self.head is not None:
            self.head.remove()

    def next_pass(self, *_):
        import torch

        if torch.is_grad_enabled():
            self.current = (self.current + 1) % self.passes


def _shape_checker(state, plan, layer_indices, which):
    profile = plan.get("profile", {})
    layers = profile.get("layers", [])

    def check(block, hidden):
        import torch

        if which in state.checked or not torch.is_grad_enabled():
            return
        state.checked.add(which)
        index = layer_indices[block]
        if index >= len(layers) or "input_bytes" not in layers[index]:
            return
        want = layers[index]["input_bytes"]
        got = hidden.numel() * hidden.element_size()
        if want != got:
            where = f"{which}'s " if isinstance(which, str) else ""  # a graph plan's chain
            shape = (f"micro_batch {profile.get('micro_batch')} x seq_len "
                     f"{profile.get('seq_len')} " if "micro_batch" in profile else "")
            raise InputError(
                f"remat.apply: the plan is for {shape}({where}block{block}'s input {want} "
                f"bytes), the model's {where}block{block} got a {tuple(hidden.shape)} "
                f"{hidden.dtype} input ({got} bytes): plan for this shape", EXIT_BAD_INPUT)

    return check


def _check_model(model, blocks, layer_indices, plan, check_parameters):
    if len(blocks) != len(layer_indices):
        raise InputError(f"remat.apply: the plan has {len(layer_indices)} blocks, the model "
                         f"{len(blocks)}: a plan made for another model", EXIT_BAD_INPUT)
    if any(getattr(b, "gradient_checkpointing", False) for b in blocks):
        raise InputError("remat.apply: the model's own activation checkpointing is on; call "
                         "model.activation_checkpointing_disable() (gradient_checkpointing_"
                         "disable() before transformers 5) first: the plan replaces it",
                         EXIT_BAD_INPUT)
    planned = plan.get("model", {}).get("parameters")
    have = sum(p.numel() for p in model.parameters())
    if check_parameters and planned and planned != have:
        raise InputError(
            f"remat.apply: the plan is for {plan['model'].get('name')} with {planned} "
            f"parameters, the model has {have}: a plan made for another model (pass "
            "check_parameters=False when the difference is a part the plan leaves out)",
            EXIT_BAD_INPUT)


def apply(model, plan, check_parameters=True, outside_blocks="refuse"):
    """Carries out `plan` (a remat.Plan, its .json dict or a plan.json path)
    on `model`'s transformer blocks, its embedding, final norm and head
    where the plan checkpoints them, and its head and loss where the plan
    chunks the loss (a transformers causal LM); returns the model. Raises
    remat.InputError for a plan of another model (block count, parameter
    count; shape at the first forward) or one it cannot carry out (a
    chunked loss on a model that is not a causal LM it knows: plan with
    chunked_loss=0). Applying again replaces the earlier application.
    outside_blocks="keep" runs a decision it cannot carry out on the
    embedding, head or loss as keep instead of refusing the plan (the peak then
    exceeds the prediction by what that layer's decision saved). A multi-pass plan (sentence-transformers'
    passes p1, p2, ...) follows each pass's decisions in the model's
    forwards with grad, counted in turn from the first after apply. A graph
    plan (a remat.GraphPlan of an encoder-decoder's trace) is carried out on
    each chain's blocks (_apply_graph.apply_graph)."""
    plan = _plan_json(plan)
    if "chains" in plan:  # a graph plan (remat.GraphPlan): each chain on its blocks
        from ._apply_graph import apply_graph

        return apply_graph(model, plan, outside_blocks)
    passes = plan_segments(plan, outside_blocks)
    path, blocks = find_blocks(model)
    _check_model(model, blocks, passes[0].layers, plan, check_parameters)
    embedding = (find_embedding(model, path)
                 if any(p.embedding == "checkpoint" for p in passes) else None)
    norm = (find_final_norm(model, path)
            if any(p.final_norm != "keep" for p in passes) else None)
    chunks = (plan.get("job") or {}).get("loss_chunks")
    lm = find_causal_lm(model, chunks) if chunks else None
    head = find_head(model) if any(p.head != "keep" for p in passes) else None
    if lm is not None and head is not None:
        raise InputError("remat.apply: the plan recomputes the head, whose loss it chunks (the "
                         "chunked loss makes its gradients in the forward); plan with "
                         "chunked_loss=0 or without a checkpoint on the final norm",
                         EXIT_BAD_INPUT)
    unapply(model)
    modules = list(blocks) + [m for m in (embedding, norm, head) if m is not None]
    state = _Applied(modules, len(passes))
    try:
        forwards = [_pass_forwards(p, i, blocks, embedding, (norm, head), state, plan)
                    for i, p in enumerate(passes)]
        for module in modules:
            chosen = [f.get(id(module)) for f in forwards]
            if any(chosen):
                module.forward = _dispatch(state, module.forward, chosen)
        if len(passes) > 1:
            entry = embedding if embedding is not None else blocks[0]
            state.handles.append(entry.register_forward_pre_hook(state.next_pass))
        if lm is not None:
            state.head = ChunkedHead(lm, chunks)
    except Exception:
        state.restore()
        raise
    model.__dict__[_STATE] = state
    return model


def _dispatch(state, original, chosen):
    """A forward running the current pass's choice (None: the original)."""
    if len(chosen) == 1:
        return chosen[0]
    runs = [c or original for c in chosen]
    return lambda *args, **kwargs: runs[state.current](*args, **kwargs)


def _pass_forwards(p, which, blocks, embedding, tail, state, plan):
    """{id(module): forward} for one Pass: the modules its segments change
    (the blocks, and the embedding, the final norm and the head where a
    segment holds them; tail: (norm, head) modules)."""
    checker = _shape_checker(state, plan, p.layers, which)
    forwards = {}
    queue = HostQueue() if any(seg.kind == "offload" for seg in p.segments) else None
    for seg in p.segments:
        if seg.kind == "keep":
            continue
        members = [blocks[i] for i in range(max(seg.start, 0), min(seg.stop, len(blocks)))]
        if seg.kind == "selective":
            forwards[id(members[0])] = _selective_forward(_selective(blocks, seg, state), checker)
            continue
        original = embedding.forward if seg.start < 0 else None
        if seg.start < 0 and seg.stop == 0:  # the embedding alone: its output is block0's kept input
            forwards[id(embedding)] = _alone(original)
            continue
        n = len(blocks)
        ends = Tail(tail[0], tail[1], seg.stop > n + 1) if seg.stop > n else None
        if ends is not None:
            forwards[id(tail[0])] = ends.norm_forward if seg.start < n else ends.norm_alone
            if ends.with_head:
                forwards[id(tail[1])] = ends.head_forward
        if seg.start >= n:  # a segment from the final norm: it keeps the norm's input only
            continue
        selectives = {c.start: _selective(blocks, c, state) for c in _nodes(seg.children)
                      if c.kind == "selective"}
        runner = _Segment(members, [b.forward for b in members], seg, checker, selectives,
                          original, ends, n if ends is not None else None, state.detached,
                          queue)
        if seg.start < 0:
            forwards[id(embedding)] = _Embedding(original, runner)
        forwards[id(members[0])] = runner.first
        for position, block in enumerate(members[1:], start=1):
            forwards[id(block)] = runner.later(position)
    return forwards


def _selective(blocks, seg, state):
    """A _Selective for the block seg.start (the block's own forward)."""
    block = blocks[seg.start]
    scopes = Scopes(block, seg.option, seg.start)
    state.scopes.append(scopes)
    return _Selective(block.forward, seg.start, seg.option, scopes)


def _selective_forward(selective, checker):
    def forward(*args, **kwargs):
        import torch

        hidden = _input(args, kwargs)
        checker(selective.index, hidden)
        if not torch.is_grad_enabled():
            return selective.original(*args, **kwargs)
        _refuse_cache(selective.original, selective.index, args, kwargs)
        return selective(hidden, args, kwargs)

    return forward


def unapply(model):
    """Restores the forwards apply replaced and removes its hooks; a model
    apply never touched is left as it is. Returns the model."""
    state = model.__dict__.pop(_STATE, None)
    if state is not None:
        state.restore()
    return model
