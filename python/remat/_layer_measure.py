"""One layer of a chain measured alone, with the definitions of remat's
LibTorch profiler (runtime/src/profiler.cc; python/remat/_profiler.py says
them): remat.profile measures real layers under remat's CPU meter with it,
remat.trace fake ones under its fake meter (_trace_chain), so that both
give the same figures for the same layer.

Two things a chain measured layer by layer would otherwise miss or add:

  - The head runs the module's forward again without grad up to the last
    block (_Chain._rest); what that run of the prefix leaves alive (a
    relative position bias, masks) is the prefix's, counted in its
    activation. The head's forward figures are taken from the moment the
    last block's output is handed on (_Chain.on_rest), above what is alive
    then.
  - A tensor the prefix makes with grad and hands every block (MPNet's
    relative position bias) gets its gradient summed over the blocks'
    backwards, from the last reader's backward to the prefix's: that layer
    creates it (shared_input_tensors), as it creates a parameter's, and
    its backward workspace is measured with the tensor needing that
    gradient (handed_backward_workspace).
"""
import time


class LayerFigures:
    """One forward with grad, its backward and one forward without grad of
    a layer: bytes, the parameters whose gradients it created, seconds."""

    def __init__(self):
        self.kept = self.forward_workspace = self.nograd_workspace = 0
        self.backward_workspace = self.gradients = 0
        self.created = []
        self.forward_s = self.backward_s = 0.0


def storage_bytes(t):
    """Bytes of the storage behind tensor t (0 for None)."""
    return 0 if t is None else t.untyped_storage().nbytes()


def _through_ones(out):
    """A scalar whose backward gives `out` a gradient of ones that only
    autograd holds, so that the layer's backward frees it once read, as in
    a chain (a gradient passed to backward() stays held by the caller to
    the end: one output's bytes too many at a block's backward peak). The
    price: for a moment at the backward's start the saved ones and the
    gradient are both live (two output's bytes, below a block's peak)."""
    import torch

    ones = torch.ones_like(out)
    return (out * ones).sum()


class _FromRest:
    """While the head's forward runs: the meter's bytes when the last
    block's output is handed on (the peak restarts there)."""

    def __init__(self, chain, meter, last):
        self.chain, self.meter, self.last = chain, meter, last
        self.mark = None

    def __enter__(self):
        if self.last:
            self.chain.on_rest = self._mark
        return self

    def _mark(self):
        self.mark = self.meter.current_bytes()
        self.meter.reset_peak()

    def __exit__(self, *exc):
        self.chain.on_rest = None

    def rise(self, before):
        """The forward's peak above `before`, what the prefix's run left
        alive at the mark aside."""
        peak = self.meter.peak_bytes()
        return peak - before if self.mark is None else peak - self.mark


def measure_layer(chain, meter, i, x, params, forward=None, backward=None, outside=(),
                  on_output=None):
    """Layer i's LayerFigures on input x: a forward with grad, its backward
    (from no gradients of `params` but those other layers left), a forward
    without grad. forward/backward: context managers entered around the
    forward with grad and the backward (the tracer's op costs and
    saved-tensor hooks). outside: tensors of another chain the layer reads
    (an encoder's output, for a decoder block's cross-attention): the
    gradient the backward makes for them is the graph's, not the layer's
    workspace (docs/graphs.md). on_output(out, x): called with the
    forward's output and input while the forward's context is on."""
    import contextlib

    import torch

    forward = forward or contextlib.nullcontext()
    backward = backward or contextlib.nullcontext()
    last = i == len(chain.layer_inputs()) - 1
    # A layer whose forward resumes a forward run before it (the head; a later pass's
    # embedding after the pass before it, _trace_sentence) is measured from
    # where that run hands it its input.
    resumes = last or i in getattr(chain, "resumes", ())
    if x is not None and i > 0:
        x = x.detach().requires_grad_(True)
    f = LayerFigures()
    before = meter.current_bytes()
    meter.reset_peak()
    t = time.perf_counter()
    with forward, _FromRest(chain, meter, resumes) as rest:
        out, holder = chain.run(i, x)
        if on_output is not None:
            on_output(out, x)
    f.forward_s = time.perf_counter() - t
    after = meter.current_bytes()
    f.kept = after - before
    f.forward_workspace = rest.rise(before) - f.kept
    # A chain's last layer ends in the loss, or hands its output on to
    # another chain (chain.hand_on): that output gets a gradient as a
    # block's does.
    loss = last and getattr(chain, "hand_on", None) is None
    root = out if loss else _through_ones(out)
    had = [p.grad is not None for p in params]
    # The output is the next layer's input, which a chain frees after that
    # layer's backward, before this one's, unless this layer saved it. The
    # planner has it gone at this backward (no layer's backward reads its
    # output, the loss's aside): what deleting it does not free (saved by
    # the layer) counts in the workspace.
    live = meter.current_bytes() - (0 if loss else storage_bytes(out))
    with_grad = out.requires_grad
    del out, holder
    for o in outside:
        o.grad = None
    meter.reset_peak()
    t = time.perf_counter()
    with backward:
        if with_grad:
            root.backward()
    f.backward_s = time.perf_counter() - t
    for p, h in zip(params, had):
        if not h and p.grad is not None:
            f.gradients += storage_bytes(p.grad)
            f.created.append(p)
    input_grad = x.grad if x is not None and x.requires_grad else None
    f.backward_workspace = (meter.peak_bytes() - live - storage_bytes(input_grad)
                            - f.gradients - sum(storage_bytes(o.grad) for o in outside))
    for o in outside:
        o.grad = None
    del root, input_grad
    if x is not None:
        x.grad = None
    before = meter.current_bytes()
    meter.reset_peak()
    with torch.no_grad(), _FromRest(chain, meter, resumes) as rest:
        out, holder = chain.run(i, x)
        f.nograd_workspace = rest.rise(before) - storage_bytes(out)
    del out, holder
    return f


def shared_input_tensors(chain, outside=()):
    """{layer index: [tensor]}: the tensors besides the hidden state that
    the prefix or a block hands later blocks and that need a gradient (made
    from parameters, with grad: MPNet's relative position bias from the
    prefix, T5's from each stack's first block), as the chain's calls hold
    them (without grad), each at the last block given it: its backward
    creates the gradient that the blocks' backwards sum into, held to the
    maker's backward (the layer's gradient_bytes). Runs the prefix, and
    each block handing such a tensor on, once with grad. Tensors in
    `outside` (another chain's output) are the graph's."""
    import torch
    from torch.utils._pytree import tree_flatten

    calls = [tree_flatten(c)[0] for c in chain.calls]
    owners = _block_handed(chain, calls, outside)
    if not chain.has_prefix:
        return owners
    from ._profiler import _first_tensor_arg

    x0 = _first_tensor_arg(*chain.calls[0])
    with torch.enable_grad():
        _, holder = chain.run(0, None)
        with_grad = tree_flatten(holder)[0]
    seen = set()
    for j, leaf in enumerate(calls[0]):
        if not isinstance(leaf, torch.Tensor) or j >= len(with_grad):
            continue
        graded = with_grad[j]
        if (leaf is x0 or id(leaf) in seen or any(leaf is o for o in outside)
                or not isinstance(graded, torch.Tensor) or not graded.requires_grad):
            continue
        seen.add(id(leaf))
        k_last = max(k for k, c in enumerate(calls) if any(t is leaf for t in c))
        owners.setdefault(k_last + 1, []).append(leaf)
    del holder, with_grad
    return owners


def handed_backward_workspace(chain, meter, i, x, params, tensors, outside=()):
    """Layer i's backward workspace with `tensors` (those later blocks are
    handed, layer i the last given them: shared_input_tensors) needing
    their gradient, as in a step: its backward makes that gradient, which
    the blocks before it add into (the layer's gradient_bytes), and the
    workspace is over it wherever in the backward it is made (before or
    after the backward's peak). The layer runs again from no parameter
    gradients; they are put back after, the tensors left without grad."""
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    for t in tensors:
        t.requires_grad_(True)
    try:
        f = measure_layer(chain, meter, i, x, params, outside=tuple(outside) + tuple(tensors))
    finally:
        for t in tensors:
            t.grad = None
            t.requires_grad_(False)
        for p, g in zip(params, grads):
            p.grad = g
    return f.backward_workspace


def _block_handed(chain, calls, outside):
    """shared_input_tensors' part for tensors a block returns besides its
    hidden state and later blocks are given (T5's position bias): {layer
    index of the last block given one: [tensor]}, where the block run with
    grad returns it with grad."""
    import torch
    from torch.utils._pytree import tree_flatten

    from ._profiler import _hidden

    first = 1 if chain.has_prefix else 0
    owners, seen = {}, set()
    for k, out in enumerate(chain.outputs):
        leaves, hidden = tree_flatten(out)[0], _hidden(out)
        handed = [(j, t) for j, t in enumerate(leaves)
                  if isinstance(t, torch.Tensor) and t is not hidden and id(t) not in seen
                  and not any(t is o for o in outside)
                  and not any(t is x for x in calls[k])  # made by the block, not handed through
                  and any(t is x for c in calls[k + 1:] for x in c)]
        if not handed:
            continue
        with torch.enable_grad():
            _, holder = chain.run(first + k, chain.xs[k])
            graded = tree_flatten(holder)[0]
        for j, t in handed:
            if j < len(graded) and isinstance(graded[j], torch.Tensor) and graded[j].requires_grad:
                seen.add(id(t))
                last = max(m for m, c in enumerate(calls) if any(t is x for x in c))
                owners.setdefault(first + last, []).append(t)
        del holder, graded
    return owners
