"""The tracer's meter: what remat's CPU allocator meter counts, for fake
tensors.

A TorchDispatchMode above PyTorch's FakeTensorMode sees every op call of
the traced program. A storage is allocated when an op returns a tensor on
a storage no live tensor had (a view or an in-place op returns its
input's), and freed when PyTorch frees its StorageImpl (a weakref finalizer
on the storage's Python object, which PyTorch keeps as long as the storage
lives). The bytes are the storage's nbytes, as the CPU meter counts an
allocation. Nothing is allocated: fake tensors have shapes, dtypes and
devices only. What a kernel allocates inside itself and frees before it
returns is not an op's output, and is not seen.

Each op call also gets its cost for the roofline (_trace_roofline): FLOPs
from torch.utils.flop_counter's formulas (matmuls, convolutions, attention
kernels), bytes as the tensors it reads and writes (none for views), and
the random elements it draws (a dropout's Bernoulli mask).
"""
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

_RANDOM_OPS = ("bernoulli", "bernoulli_", "native_dropout")
_FREE_OPS = (torch.ops.aten.detach, torch.ops.aten.alias, torch.ops.aten._unsafe_view,
             torch.ops.aten.lift_fresh)


def storage_bytes(t):
    """Bytes of the storage behind tensor t (0 for None)."""
    return 0 if t is None else t.untyped_storage().nbytes()


def storage_key(t):
    """The StorageImpl behind a tensor: one key for all its views."""
    return t.untyped_storage()._cdata


class OpCost:
    """One op call's roofline inputs: flops, bytes read and written, random
    elements drawn, and whether it runs in a 16-bit dtype."""

    __slots__ = ("flops", "bytes", "random", "half")

    def __init__(self, flops, nbytes, random, half):
        self.flops, self.bytes, self.random, self.half = flops, nbytes, random, half


class FakeMeter(TorchDispatchMode):
    """Live storage bytes and their peak over a fake program. While `costs`
    is a list, each op call's OpCost is appended to it; each of `observers`
    is called with (func, outputs) for every op call."""

    def __init__(self):
        super().__init__()
        self.live = {}  # storage key -> bytes
        self.current = 0
        self.peak = 0
        self.costs = None
        self.observers = []

    # The interface of remat_measure's meter that a chain measurement reads.
    def current_bytes(self):
        return self.current

    def peak_bytes(self):
        return self.peak

    def reset_peak(self):
        self.peak = self.current

    def _free(self, key):
        nbytes = self.live.pop(key, None)
        if nbytes is not None:
            self.current -= nbytes

    def note(self, t):
        """Counts t's storage if no live tensor had it."""
        storage = t.untyped_storage()
        key = storage._cdata
        nbytes = storage.nbytes()
        old = self.live.get(key)
        if old is None:
            self.live[key] = nbytes
            self.current += nbytes
            weakref.finalize(storage, self._free, key)
        elif nbytes != old:  # resized in place
            self.live[key] = nbytes
            self.current += nbytes - old
        if self.current > self.peak:
            self.peak = self.current

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        for t in outs:
            self.note(t)
        if self.costs is not None:
            self.costs.append(_cost(func, args, kwargs, out, outs))
        for observe in self.observers:
            observe(func, outs)
        return out


def _cost(func, args, kwargs, out, outs):
    ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    half = any(t.dtype in (torch.float16, torch.bfloat16) for t in ins + outs)
    if func.is_view or func.overloadpacket in _FREE_OPS:
        return OpCost(0, 0, 0, half)
    flops = 0
    formula = flop_registry.get(func.overloadpacket)
    if formula is not None:
        flops = formula(*args, **kwargs, out_val=out)
    seen, nbytes = set(), 0
    for t in ins + outs:
        if id(t) not in seen:
            seen.add(id(t))
            nbytes += t.numel() * t.element_size()
    random = outs[0].numel() if func.overloadpacket.__name__ in _RANDOM_OPS and outs else 0
    return OpCost(flops, nbytes, random, half)
