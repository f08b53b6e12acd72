"""remat.profile(module, example_inputs): a measured remat profile of a
PyTorch module run as a chain, on CPU under remat's allocator meter.

The chain is what the module runs: a prefix (whatever runs before the first
block: an embedding), the blocks (the ModuleList remat.apply finds, or the
modules the caller names, in the order the module runs them) and the rest
(head and loss). Each layer runs alone on its input as the module gave it,
with grad, and is measured with the definitions of remat's LibTorch
profiler (runtime/src/profiler.cc), so that a plan from the profile
predicts a training step of the module:

  activation_bytes   bytes live after the forward with grad minus before
                     (the output included; at least the output)
  forward_workspace  the forward's peak minus what is live after it
  backward_workspace the backward's peak minus what was live before it,
                     the input's gradient and the parameter gradients it
                     created (signed: autograd frees saved tensors as it
                     runs; never below -(activation_bytes - output_bytes))
  gradient_bytes     the parameter gradients the backward created (PyTorch
                     creates them in backward; the optimizer frees them)

Two things differ from the LibTorch profiler, both as PyTorch's autograd
runs a chain: the output's gradient is held by autograd alone (freed once
read), and the output is let go before the backward (a chain frees it after
the next layer's backward, unless this layer saved it).

Each round measures the layers last first, as a backward meets them, from
no gradients; times are medians over `repeats` rounds after one warm-up.
"""
import statistics
import time

from ._blocks import find_blocks
from ._layer_measure import handed_backward_workspace, measure_layer, shared_input_tensors
from ._planner import EXIT_BAD_INPUT, InputError, write_json


class Profile:
    """A measured profile: `json` is the profile (docs/formats.md, "Profile
    format"), accepted by remat.plan(profile, budget=...)."""

    def __init__(self, data):
        self.json = data

    @property
    def layers(self):
        return self.json["layers"]

    @property
    def static_bytes(self):
        return self.json["static_bytes"]

    def save(self, path):
        """Writes the profile JSON to `path` (replaced whole), for the
        `planner` command."""
        write_json(path, self.json)

    def __repr__(self):
        return "<remat.Profile {} layers, static {} B>".format(len(self.layers), self.static_bytes)


class _Stop(Exception):
    """Raised by the first block's pre-hook: the prefix has run."""

    def __init__(self, args, kwargs):
        super().__init__("remat.profile: prefix done")
        self.args_, self.kwargs_ = args, kwargs


def _hidden(value):
    """The tensor a block passes on: the value, or its first item."""
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    raise InputError("remat.profile: a block's input or output is a "
                     f"{type(value).__name__}; blocks pass one tensor on (or a tuple whose "
                     "first item is that tensor)", EXIT_BAD_INPUT)


def _first_tensor_arg(args, kwargs):
    if args:
        return _hidden(args[0])
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"]
    raise InputError("remat.profile: the first block was called without a positional input or "
                     "hidden_states=; blocks take the hidden state first", EXIT_BAD_INPUT)


def _with_first(args, kwargs, x):
    if args:
        return (x,) + tuple(args[1:]), kwargs
    return args, dict(kwargs, hidden_states=x)


def _bytes(t):
    """Bytes the allocator gave the tensor's storage (0 for none)."""
    return 0 if t is None else t.untyped_storage().nbytes()


def _call(module, inputs):
    if isinstance(inputs, dict):
        return module(**inputs)
    if isinstance(inputs, (tuple, list)):
        return module(*inputs)
    return module(inputs)


def _loss_of(output, inputs, loss_fn):
    import torch

    if loss_fn is not None:
        loss = loss_fn(output, inputs)
    elif isinstance(output, torch.Tensor):
        loss = output
    elif hasattr(output, "loss") and getattr(output, "loss") is not None:
        loss = output.loss
    elif isinstance(output, dict) and "loss" in output:
        loss = output["loss"]
    else:
        raise InputError("remat.profile: the module returned no loss (a scalar tensor, .loss or "
                         "['loss']); pass loss_fn=lambda output, inputs: ...", EXIT_BAD_INPUT)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise InputError("remat.profile: the loss is not a one-element tensor; loss_fn returns "
                         "the training step's scalar loss", EXIT_BAD_INPUT)
    return loss


class _Chain:
    """The module cut at its blocks: run(i, x) runs layer i alone with grad
    on input x and returns (output tensor, what keeps it alive)."""

    def __init__(self, module, inputs, blocks, loss_fn, hand_on=None):
        import torch

        self.module, self.inputs, self.blocks, self.loss_fn = module, inputs, blocks, loss_fn
        # hand_on(output): the tensor the chain hands to another chain (an
        # encoder's output), in place of a loss; the last layer ends there.
        self.hand_on = hand_on
        self.on_rest = None  # called in _rest as the last block's output is handed on
        self.calls = [None] * len(blocks)   # (args, kwargs) each block was given
        self.outputs = [None] * len(blocks)  # each block's output, as returned
        handles = []
        for k, block in enumerate(blocks):
            handles.append(block.register_forward_pre_hook(self._recorder(k), with_kwargs=True))
            handles.append(block.register_forward_hook(self._output_recorder(k)))
        try:
            with torch.no_grad():
                _call(module, inputs)
        finally:
            for h in handles:
                h.remove()
        missing = [k for k, c in enumerate(self.calls) if c is None]
        if missing:
            raise InputError(f"remat.profile: block {missing[0]} did not run in the module's "
                             "forward; blocks are modules the forward calls, in order",
                             EXIT_BAD_INPUT)
        x0 = _first_tensor_arg(*self.calls[0])
        # No prefix when the first block gets an example input itself.
        given = inputs.values() if isinstance(inputs, dict) else (
            inputs if isinstance(inputs, (tuple, list)) else (inputs,))
        self.has_prefix = not any(x0 is t for t in given)
        self.xs = [_first_tensor_arg(*c).detach() for c in self.calls]
        self.last_output = _hidden(self.outputs[-1]).detach()

    def _recorder(self, k):
        def hook(_, args, kwargs):
            if self.calls[k] is None:
                self.calls[k] = (args, kwargs)
        return hook

    def _output_recorder(self, k):
        def hook(_, args, output):
            if self.outputs[k] is None:
                self.outputs[k] = output
        return hook

    def layer_inputs(self):
        """Each layer's input (None for the prefix: the example inputs)."""
        return ([None] if self.has_prefix else []) + self.xs + [self.last_output]

    def names_and_kinds(self):
        names = [("embedding", "embedding")] if self.has_prefix else []
        names += [(f"block{k}", "block") for k in range(len(self.blocks))]
        return names + [("head", "head")]

    def run(self, i, x):
        """Layer i's forward with grad; returns (output tensor, holder)."""
        first = 1 if self.has_prefix else 0
        if self.has_prefix and i == 0:
            return self._prefix()
        if i - first < len(self.blocks):
            args, kwargs = _with_first(*self.calls[i - first], x)
            out = self.blocks[i - first](*args, **kwargs)
            return _hidden(out), out
        return self._rest(x)

    def _prefix(self):
        def stop(_, args, kwargs):
            raise _Stop(args, kwargs)

        handle = self.blocks[0].register_forward_pre_hook(stop, with_kwargs=True)
        try:
            _call(self.module, self.inputs)
        except _Stop as s:
            return _first_tensor_arg(s.args_, s.kwargs_), (s.args_, s.kwargs_)
        finally:
            handle.remove()
        raise InputError("remat.profile: the module's forward returned before its first block",
                         EXIT_BAD_INPUT)

    def _rest(self, x):
        """The module from the last block's output to the loss: the prefix
        without grad, each block replaced by its recorded output, the last
        block's by `x`, from where grad is on again."""
        with _replayed(self.blocks, self.outputs, x, lambda: self.on_rest):
            output = _call(self.module, self.inputs)
            loss = (self.hand_on(output) if self.hand_on is not None
                    else _loss_of(output, self.inputs, self.loss_fn))
        return loss, output


class _replayed:
    """While entered, grad is off and each of `blocks` returns its recorded
    output (`outputs`, one per block) without running; the last block
    returns `x` in its output's place, turning grad back to what it was and
    calling on_rest() (when not None) first: a forward run again from the
    last block's output. The blocks' own forwards come back on exit."""

    def __init__(self, blocks, outputs, x, on_rest):
        self.blocks, self.outputs, self.x, self.on_rest = blocks, outputs, x, on_rest

    def _recorded(self, k):
        import torch

        def forward(*args, **kwargs):
            out = self.outputs[k]
            if k < len(self.blocks) - 1:
                return out
            torch.set_grad_enabled(self.grad_mode)
            hook = self.on_rest()
            if hook is not None:
                hook()
            if isinstance(out, torch.Tensor):
                return self.x
            return (type(out)((self.x,) + tuple(out[1:])) if isinstance(out, tuple)
                    else [self.x] + out[1:])
        return forward

    def __enter__(self):
        import torch

        self.grad_mode = torch.is_grad_enabled()
        self.own = [b.__dict__.get("forward") for b in self.blocks]
        for k, b in enumerate(self.blocks):
            b.forward = self._recorded(k)
        torch.set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_grad_enabled(self.grad_mode)
        for b, f in zip(self.blocks, self.own):
            if f is None:
                del b.forward
            else:
                b.forward = f


def _median_ms(seconds):
    return 1e3 * statistics.median(seconds) if seconds else 0.0


def _spread(seconds):
    if len(seconds) < 2:
        return 0.0
    q = statistics.quantiles(seconds, n=4, method="inclusive")
    med = statistics.median(seconds)
    return (q[2] - q[0]) / med if med > 0 else 0.0


class _Samples:
    def __init__(self):
        self.forward_s, self.backward_s = [], []
        self.kept = self.forward_workspace = self.nograd_workspace = 0
        self.backward_workspace = None
        self.gradients = 0


def _measure_round(chain, meter, i, x, params, created, samples, timed):
    """One forward with grad and backward of layer i (profiler.cc
    MeasureGrad), then one forward without grad (_layer_measure)."""
    for p in created[i]:
        p.grad = None
    f = measure_layer(chain, meter, i, x, params)
    created[i] = f.created
    if timed:
        s = samples[i]
        s.forward_s.append(f.forward_s)
        s.backward_s.append(f.backward_s)
        # Bytes as maxima over the repetitions, as the profiler keeps them.
        s.kept = max(s.kept, f.kept)
        s.forward_workspace = max(s.forward_workspace, f.forward_workspace)
        s.backward_workspace = (f.backward_workspace if s.backward_workspace is None
                                else max(s.backward_workspace, f.backward_workspace))
        s.gradients = max(s.gradients, f.gradients)
        s.nograd_workspace = max(s.nograd_workspace, f.nograd_workspace)


def _optimizer_step(params, repeats, meter):
    """Median time of an AdamW step on copies of the parameters (the
    module's own are left as they are), and the most its temporaries took
    above the parameters, gradients and state (optimizer_workspace_bytes)."""
    import torch

    copies = [p.detach().clone().requires_grad_(True) for p in params]
    for c in copies:
        c.grad = torch.zeros_like(c)
    opt = torch.optim.AdamW(copies, lr=1e-4)
    times, workspace = [], 0
    for r in range(repeats + 1):
        before = meter.current_bytes()
        meter.reset_peak()
        t = time.perf_counter()
        opt.step()
        if r:
            times.append(time.perf_counter() - t)
            workspace = max(workspace, meter.peak_bytes() - before)  # the first makes the state
    return _median_ms(times), workspace


def _static(module, params):
    """Parameters and buffers, AdamW's two moments per parameter and its
    step counters (one 4-byte tensor per parameter); gradients are created
    in backward (each layer's gradient_bytes)."""
    import torch

    storages = {}
    for t in list(module.parameters()) + list(module.buffers()):
        storages[t.untyped_storage().data_ptr()] = _bytes(t)
    optimizer = sum(2 * p.numel() * p.element_size() + torch.tensor(0.0).element_size()
                    for p in params)
    return {"parameter_bytes": sum(storages.values()), "gradient_bytes": 0,
            "optimizer_bytes": optimizer}


def profile(module, example_inputs, loss_fn=None, blocks=None, repeats=3, name=None):
    """Measures `module` as a chain (prefix, blocks, rest) on
    `example_inputs` (a tensor, a tuple of positional inputs or a dict of
    keyword inputs: one micro-batch) and returns a remat.Profile.

    blocks: the modules that are the chain's blocks, in the order the
    module runs them (default: the one ModuleList remat.apply finds).
    loss_fn(output, example_inputs): the training loss from the module's
    output (default: the output itself when it is a scalar tensor, else
    its .loss or ['loss']). repeats: timed rounds (median; bytes are the
    maxima). Needs remat's CPU meter (remat_measure, $REMAT_METER_LIB),
    loaded before the module's tensors are made, and a module on CPU.
    Parameter gradients must be None (zero_grad()); they are None after."""
    import torch
    import remat_measure

    if not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"remat.profile: repeats must be an integer >= 1, got {repeats!r}",
                         EXIT_BAD_INPUT)
    params = [p for p in module.parameters() if p.requires_grad]
    devices = {p.device.type for p in module.parameters()}
    if devices - {"cpu"}:
        raise InputError(f"remat.profile: the module is on {', '.join(sorted(devices))}; "
                         "remat.profile measures CPU modules (remat's CPU meter)", EXIT_BAD_INPUT)
    if any(p.grad is not None for p in params):
        raise InputError("remat.profile: the module's parameters have gradients; call "
                         "module.zero_grad() first (gradients are measured as each backward "
                         "creates them)", EXIT_BAD_INPUT)
    if blocks is None:
        _, blocks = find_blocks(module)
    blocks = list(blocks)
    if not blocks or not all(isinstance(b, torch.nn.Module) for b in blocks):
        raise InputError("remat.profile: blocks must be a non-empty list of the module's "
                         "submodules", EXIT_BAD_INPUT)
    meter = remat_measure.load()
    chain = _Chain(module, example_inputs, blocks, loss_fn)
    xs = chain.layer_inputs()
    n = len(xs)
    samples = [_Samples() for _ in range(n)]
    for r in range(repeats + 1):
        created = [[] for _ in range(n)]
        for p in params:
            p.grad = None
        for i in reversed(range(n)):
            _measure_round(chain, meter, i, xs[i], params, created, samples, r > 0)
    for p in params:
        p.grad = None
    handed = shared_input_tensors(chain)
    for i, tensors in handed.items():  # the last block given them: its own backward workspace
        samples[i].backward_workspace = handed_backward_workspace(chain, meter, i, xs[i], params,
                                                                  tensors)
    shared = {i: sum(_bytes(t) for t in tensors) for i, tensors in handed.items()}

    layers = []
    outputs = xs[1:] + [None]
    for i, (layer_name, kind) in enumerate(chain.names_and_kinds()):
        s = samples[i]
        in_bytes = _bytes(xs[i]) if xs[i] is not None else 0
        out_bytes = _bytes(outputs[i]) if outputs[i] is not None else 4
        activation = max(s.kept, out_bytes)
        layer = {"name": layer_name, "kind": kind,
                 "forward_ms": _median_ms(s.forward_s), "backward_ms": _median_ms(s.backward_s),
                 "time_spread": min(max(_spread(s.forward_s), _spread(s.backward_s)), 1e6),
                 "input_bytes": in_bytes, "output_bytes": out_bytes,
                 "activation_bytes": activation,
                 "forward_workspace_bytes": max(0, s.forward_workspace),
                 "forward_nograd_workspace_bytes": max(0, s.nograd_workspace),
                 "backward_workspace_bytes": max(s.backward_workspace, -(activation - out_bytes)),
                 "gradient_bytes": s.gradients + shared.get(i, 0)}
        layers.append(layer)
    if chain.has_prefix:
        layers[0]["input_bytes"] = _input_bytes(example_inputs)
    static = _static(module, params)
    optimizer_ms, optimizer_workspace = _optimizer_step(params, repeats, meter)
    data = {"model": name or type(module).__name__, "source": "pytorch-cpu",
            "device": "cpu, wall time",
            "parameters": sum(p.numel() for p in module.parameters()),
            "static_bytes": sum(static.values()), "static": static,
            "optimizer_ms": optimizer_ms, "optimizer_workspace_bytes": optimizer_workspace,
            "layers": layers,
            "provenance": {"torch_version": torch.__version__,
                           "intra_op_threads": torch.get_num_threads(),
                           "allocator": "remat CPU meter"}}
    return Profile(data)


def _input_bytes(inputs):
    import torch

    given = inputs.values() if isinstance(inputs, dict) else (
        inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    storages = {t.untyped_storage().data_ptr(): _bytes(t) for t in given
                if isinstance(t, torch.Tensor)}
    return sum(storages.values())  # a tensor given twice (ids as labels) once
