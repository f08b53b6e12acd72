"""The traced chain's layers measured under the tracer's meter: each layer
(the prefix, each distinct block, the rest up to the loss) runs alone on
its input with grad, then its backward, then again without grad, with the
definitions of remat.profile (python/remat/_layer_measure.py: activation,
forward, no-grad and backward workspaces, gradients created), so that a
plan from a traced profile predicts a training step as one from a measured
profile does. The layers run last first, as a backward meets them.

Blocks are one class when they are of one class with the same tensors'
shapes and settings, and their calls in the model's forward get inputs of
the same shapes and values (block_signatures): 80 identical blocks are
traced once, and the forward that cuts the chain runs only the first.
Saved-tensor hooks count what each layer's autograd graph saves (saved_bytes:
the distinct storages, parameters and the layer's input aside).
"""
import contextlib
import copy

import torch

from . import _layer_measure
from ._profiler import _Chain
from ._trace_meter import storage_bytes, storage_key


class LayerTrace:
    """One layer's figures (bytes) and its forward and backward op costs."""

    def __init__(self):
        self.kept = self.forward_workspace = self.nograd_workspace = 0
        self.backward_workspace = self.gradients = self.saved = 0
        # After a recompute, where that backward differs (_trace_compile).
        self.recompute_backward_workspace = None
        # Selective options as compiled (_trace_compile): [(name, kept bytes,
        # recompute workspace bytes, the OpCosts it runs again in backward,
        # the OpCosts the plain block runs again there)].
        self.selective = []
        self.forward_costs, self.backward_costs = [], []
        # Whether its backward reads its input (a saved tensor of the
        # input's storage), its output, or its output is (a view of) its
        # input: each keeps what the layer was given alive to its backward.
        self.saves_input = self.saves_output = self.output_is_input = True


class _Saved:
    """Saved-tensor hooks: the bytes of distinct storages a forward saves,
    those in `ignore` (parameters, the layer's input) aside."""

    def __init__(self, ignore, input_key=None):
        self.ignore, self.seen, self.bytes = ignore, set(), 0
        self.input_key, self.packed = input_key, set()

    def pack(self, t):
        key = storage_key(t)
        self.packed.add(key)
        if key not in self.ignore and key not in self.seen:
            self.seen.add(key)
            self.bytes += storage_bytes(t)
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


_PRIMITIVE = (bool, int, float, str, type(None), torch.dtype)
# Whether blocks of one class share one trace (remat_trace_test turns it
# off to check that the shared traces are each block's own).
SHARE_BLOCKS = True


def _settings(block):
    """A block's settings: every submodule's attributes that are plain
    values (a window size, an attention kind, a flag), by path."""
    out = {}
    for path, mod in block.named_modules():
        for name, value in vars(mod).items():
            if isinstance(value, _PRIMITIVE) or (
                    isinstance(value, (tuple, list)) and all(isinstance(v, _PRIMITIVE)
                                                            for v in value)):
                out[f"{path}.{name}"] = value if not isinstance(value, list) else tuple(value)
    return out


def _structures(blocks):
    """Per block, what its forward's ops follow from besides its input: its
    class, its parameters' and buffers' shapes and dtypes, and its
    settings, less a layer number (an int setting that is the block's index
    plus one constant in every block that has it: Qwen3-Next's linear- and
    full-attention blocks each number theirs; transformers' blocks read it
    only for a KV cache)."""
    settings = [_settings(b) for b in blocks]
    numbered = set()
    for key in set().union(*settings):
        held = [(k, s[key]) for k, s in enumerate(settings) if key in s]
        if len(held) > 1 and all(type(v) is int for _, v in held) and \
                len({v - k for k, v in held}) == 1:
            numbered.add(key)
    structures = []
    for b, found in zip(blocks, settings):
        tensors = tuple((n, tuple(t.shape), t.dtype, t.requires_grad)
                        for n, t in list(b.named_parameters()) + list(b.named_buffers()))
        kept = tuple(sorted((k, repr(v)) for k, v in found.items() if k not in numbered))
        structures.append((type(b).__qualname__, tensors, kept))
    return structures


def _call_signature(args, kwargs):
    """What a block's ops follow from in its call: the inputs' tensor
    shapes, strides, dtypes and grad, and their plain values."""
    from torch.utils._pytree import tree_flatten

    leaves, spec = tree_flatten((args, kwargs))
    sig = []
    for v in leaves:
        if isinstance(v, torch.Tensor):
            sig.append((tuple(v.shape), v.stride(), v.dtype, v.requires_grad))
        elif isinstance(v, _PRIMITIVE):
            sig.append(repr(v))
        else:
            sig.append(type(v).__qualname__)
    return str(spec), tuple(sig)


def _like(value):
    """A new tensor like each tensor in `value` (a block's output)."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: torch.empty_like(t) if isinstance(t, torch.Tensor) else t, value)


def block_signatures(module, inputs, blocks, loss_fn, hand_on=None):
    """Per block, what makes it one of a class: its structure (_structures)
    and its call's signature, recorded in one forward of the module without
    grad (the _Chain's). A block whose structure and call match an earlier
    block's runs the same ops on the same shapes: its forward is not run,
    its output made like that block's. Returns (signatures, _Chain)."""
    structures = _structures(blocks)
    run = {}  # (structure, call signature) -> the output of the block that ran
    signatures = [None] * len(blocks)

    def forward_of(k, original):
        def forward(*args, **kwargs):
            key = (structures[k], _call_signature(args, kwargs)) if SHARE_BLOCKS else k
            signatures[k] = key
            if key in run:
                return _like(run[key])
            out = original(*args, **kwargs)
            run[key] = out
            return out
        return forward

    own = [b.__dict__.get("forward") for b in blocks]  # a wrapper set on the instance
    for k, b in enumerate(blocks):
        b.forward = forward_of(k, b.forward)
    try:
        chain = _Chain(module, inputs, blocks, loss_fn, hand_on)
    finally:
        for b, f in zip(blocks, own):
            if f is None:
                del b.forward
            else:
                b.forward = f
    return signatures, chain


@contextlib.contextmanager
def _costs(meter, costs, hooks=None):
    """The meter appends each op call's cost to `costs` (and `hooks`, the
    saved-tensor hooks, are on) while the block runs."""
    meter.costs = costs
    try:
        with hooks or contextlib.nullcontext():
            yield
    finally:
        meter.costs = None


def measure_layer(chain, meter, i, x, params, param_keys, outside=()):
    """Layer i's LayerTrace (_layer_measure's figures, as remat.profile
    takes them), its op costs and saved bytes. Gradients the layer creates
    stay (a later layer's backward accumulates into a tied weight's, as in
    a step). outside: another chain's tensors the layer reads (not its
    own, as parameters are not)."""
    tr = LayerTrace()
    ignore = param_keys | {storage_key(o) for o in outside}
    saved = _Saved(ignore | ({storage_key(x)} if x is not None else set()))

    def on_output(out, given):
        if given is not None and isinstance(out, torch.Tensor):
            tr.saves_input = storage_key(given) in saved.packed
            tr.saves_output = storage_key(out) in saved.packed
            tr.output_is_input = storage_key(out) == storage_key(given)
    f = _layer_measure.measure_layer(chain, meter, i, x, params,
                                     forward=_costs(meter, tr.forward_costs, saved.hooks()),
                                     backward=_costs(meter, tr.backward_costs), outside=outside,
                                     on_output=on_output)
    tr.kept, tr.forward_workspace = f.kept, f.forward_workspace
    tr.backward_workspace, tr.gradients = f.backward_workspace, f.gradients
    tr.nograd_workspace, tr.saved = f.nograd_workspace, saved.bytes
    return tr


def trace_layers(module, inputs, blocks, loss_fn, meter, hand_on=None, outside=(),
                 keep_grads=False, make_chain=None):
    """(chain, traces, classes, shared): the chain, one LayerTrace per
    layer (blocks of one class share their first one's), per layer the
    index of the layer whose trace it has, and the gradient bytes of
    tensors the prefix hands the blocks, by the layer that creates them
    (_layer_measure.shared_input_tensors). For a chain of a graph
    (_trace_graph): hand_on gives the output the chain hands on in place of
    a loss, outside the other chains' tensors its layers read, and
    keep_grads leaves the parameters' gradients for the chain traced next
    (the one whose backward runs next: a tied embedding's gradient is
    created once). make_chain: a callable giving another chain with its
    block calls' signatures (_trace_sentence.PassChain), in place of the
    module cut at its blocks."""
    if make_chain is not None:
        chain = make_chain()
        signatures = chain.signatures
    else:
        signatures, chain = block_signatures(module, inputs, blocks, loss_fn, hand_on)
    first = 1 if chain.has_prefix else 0
    n = len(chain.layer_inputs())
    owner = list(range(n))
    firsts = {}
    layer_of = getattr(chain, "layer_of", lambda k: first + k)  # block call k's layer
    for k, sig in enumerate(signatures):
        owner[layer_of(k)] = firsts.setdefault(sig, layer_of(k))
    params = [p for p in module.parameters() if p.requires_grad]
    param_keys = {storage_key(t) for t in list(module.parameters()) + list(module.buffers())}
    xs = chain.layer_inputs()
    traces = [None] * n
    for i in reversed(range(n)):
        if owner[i] == i:
            traces[i] = measure_layer(chain, meter, i, xs[i], params, param_keys, outside)
    per_layer = [traces[owner[i]] for i in range(n)]
    handed = _layer_measure.shared_input_tensors(chain, outside)
    for i, tensors in handed.items():  # the last block given them: its own backward workspace
        per_layer[i] = copy.copy(per_layer[i])
        per_layer[i].backward_workspace = _layer_measure.handed_backward_workspace(
            chain, meter, i, xs[i], params, tensors, outside)
    if not keep_grads:
        for p in params:
            p.grad = None
    shared = {i: sum(storage_bytes(t) for t in ts) for i, ts in handed.items()}
    return chain, per_layer, owner, shared
