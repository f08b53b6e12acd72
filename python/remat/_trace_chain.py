"""The traced chain's layers measured under the tracer's meter: each layer
(the prefix, each distinct block, the rest up to the loss) runs alone on
its input with grad, then its backward, then again without grad, with the
definitions of remat.profile (python/remat/_profiler.py: activation,
forward, no-grad and backward workspaces, gradients created), so that a
plan from a traced profile predicts a training step as one from a measured
profile does. The layers run last first, as a backward meets them.

Blocks are one class when their forwards, run in the model's own forward
without grad, make the same ops with the same output shapes and dtypes and
their parameters have the same shapes: 80 identical blocks are traced once.
Saved-tensor hooks count what each layer's autograd graph saves (saved_bytes:
the distinct storages, parameters and the layer's input aside).
"""
import torch

from ._profiler import _Chain, _through_ones
from ._trace_meter import storage_bytes, storage_key


class LayerTrace:
    """One layer's figures (bytes) and its forward and backward op costs."""

    def __init__(self):
        self.kept = self.forward_workspace = self.nograd_workspace = 0
        self.backward_workspace = self.gradients = self.saved = 0
        self.forward_costs, self.backward_costs = [], []


class _Saved:
    """Saved-tensor hooks: the bytes of distinct storages a forward saves,
    those in `ignore` (parameters, the layer's input) aside."""

    def __init__(self, ignore):
        self.ignore, self.seen, self.bytes = ignore, set(), 0

    def pack(self, t):
        key = storage_key(t)
        if key not in self.ignore and key not in self.seen:
            self.seen.add(key)
            self.bytes += storage_bytes(t)
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def block_signatures(module, inputs, blocks, loss_fn, meter):
    """Per block, what makes it one of a class: its parameters' shapes and
    the ops its forward runs (names, output shapes and dtypes), recorded in
    one forward of the module without grad. Returns (signatures, _Chain)."""
    ops = [[] for _ in blocks]
    current = [None]

    def enter(k):
        def hook(*_args, **_kwargs):
            current[0] = k
        return hook

    def leave(*_args):
        current[0] = None

    def observe(func, outs):
        if current[0] is not None:
            ops[current[0]].append((str(func), tuple((tuple(t.shape), t.dtype) for t in outs)))

    handles = []
    for k, b in enumerate(blocks):
        handles.append(b.register_forward_pre_hook(enter(k)))
        handles.append(b.register_forward_hook(leave))
    meter.observers.append(observe)
    try:
        chain = _Chain(module, inputs, blocks, loss_fn)
    finally:
        meter.observers.remove(observe)
        for h in handles:
            h.remove()
    signatures = []
    for k, b in enumerate(blocks):
        params = tuple((n, tuple(p.shape), p.dtype, p.requires_grad)
                       for n, p in b.named_parameters())
        signatures.append((type(b).__qualname__, params, tuple(ops[k])))
    return signatures, chain


def measure_layer(chain, meter, i, x, params, param_keys):
    """Layer i's LayerTrace (profile definitions as _profiler's
    _measure_round). Gradients the layer creates stay (a later layer's
    backward accumulates into a tied weight's, as in a step)."""
    n = len(chain.layer_inputs())
    last = i == n - 1
    if x is not None and i > 0:
        x = x.detach().requires_grad_(True)
    tr = LayerTrace()
    saved = _Saved(param_keys | ({storage_key(x)} if x is not None else set()))
    before = meter.current_bytes()
    meter.reset_peak()
    meter.costs = tr.forward_costs
    with saved.hooks():
        out, holder = chain.run(i, x)
    meter.costs = None
    after = meter.current_bytes()
    tr.kept, tr.forward_workspace = after - before, meter.peak_bytes() - after
    tr.saved = saved.bytes
    root = out if last else _through_ones(out)
    had = [p.grad is not None for p in params]
    live = meter.current_bytes() - (0 if last else storage_bytes(out))
    with_grad = out.requires_grad
    del out, holder
    meter.reset_peak()
    meter.costs = tr.backward_costs
    if with_grad:
        root.backward()
    meter.costs = None
    for p, h in zip(params, had):
        if not h and p.grad is not None:
            tr.gradients += storage_bytes(p.grad)
    input_grad = x.grad if x is not None and x.requires_grad else None
    tr.backward_workspace = (meter.peak_bytes() - live - storage_bytes(input_grad)
                             - tr.gradients)
    del root, input_grad
    if x is not None:
        x.grad = None
    before = meter.current_bytes()
    meter.reset_peak()
    with torch.no_grad():
        out, holder = chain.run(i, x)
        tr.nograd_workspace = meter.peak_bytes() - before - storage_bytes(out)
    del out, holder
    return tr


def trace_layers(module, inputs, blocks, loss_fn, meter):
    """(chain, traces, classes): the chain, one LayerTrace per layer
    (blocks of one class share their first one's), and per layer the index
    of the layer whose trace it has."""
    signatures, chain = block_signatures(module, inputs, blocks, loss_fn, meter)
    first = 1 if chain.has_prefix else 0
    n = len(chain.layer_inputs())
    owner = list(range(n))
    firsts = {}
    for k, sig in enumerate(signatures):
        owner[first + k] = firsts.setdefault(sig, first + k)
    params = [p for p in module.parameters() if p.requires_grad]
    param_keys = {storage_key(t) for t in list(module.parameters()) + list(module.buffers())}
    xs = chain.layer_inputs()
    traces = [None] * n
    for i in reversed(range(n)):
        if owner[i] == i:
            traces[i] = measure_layer(chain, meter, i, xs[i], params, param_keys)
    for p in params:
        p.grad = None
    return chain, [traces[owner[i]] for i in range(n)], owner
