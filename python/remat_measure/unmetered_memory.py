"""Tensors whose memory the meter cannot see.

The meter is an allocator hook: it counts what PyTorch's CPU allocator hands
out once the meter is installed, and nothing else. Memory that does not come
from there is invisible to it: weights mapped into memory from a file
(safetensors loads them that way, and so does transformers'
from_pretrained), tensors made before remat_measure.load(), and memory
borrowed from elsewhere (torch.from_numpy, torch.frombuffer). Such bytes
are in the process all the same, and a peak measured while a step uses
them misses them: find them (unmetered), refuse them (check), or copy them
into memory the meter counts (copy_into_meter).
"""
import dataclasses
from typing import List

from . import meter as meter_module


class UnmeteredError(meter_module.MeterError):
    """Tensors a measurement depends on are in memory the meter does not
    count; .unmetered lists them."""

    def __init__(self, message, unmetered):
        super().__init__(message)
        self.unmetered = unmetered


@dataclasses.dataclass
class Unmetered:
    """One storage the meter did not allocate."""
    name: str    # the first tensor seen on it: "model.layers.0.self_attn.q_proj.weight"
    nbytes: int  # the storage's bytes
    source: str  # "memory-mapped from /path/model.safetensors", or why else it is unseen


def _file_mappings():
    """(start, end, path) of every file mapped into this process."""
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    out.append((start, end, fields[5].rstrip("\n")))
    except OSError:  # not Linux: the source is then not named
        pass
    return out


def _source(address, mappings):
    for start, end, path in mappings:
        if start <= address < end:
            return f"memory-mapped from {path}"
    return ("not from the meter's allocator (made before remat_measure.load(), or memory "
            "borrowed from elsewhere, e.g. torch.from_numpy)")


def _named_tensors(obj, name, seen_objects):
    """(name, tensor) of the tensors `obj` holds: a tensor; a module's
    parameters and buffers; an optimizer's parameters and state; the items
    of a list, tuple or dict (one level)."""
    import torch

    if id(obj) in seen_objects:
        return
    seen_objects.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield name, obj
    elif isinstance(obj, torch.nn.Module):
        prefix = f"{name}." if name else ""
        for n, t in obj.named_parameters(remove_duplicate=True):
            yield prefix + n, t
        for n, t in obj.named_buffers(remove_duplicate=True):
            yield prefix + n, t
    elif isinstance(obj, torch.optim.Optimizer):
        for g, group in enumerate(obj.param_groups):
            for i, p in enumerate(group["params"]):
                yield f"{name}.param_groups[{g}][{i}]", p
                for key, value in obj.state.get(p, {}).items():
                    if isinstance(value, torch.Tensor):
                        yield f"{name}.state[{g}][{i}][{key!r}]", value
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            if isinstance(item, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
                yield from _named_tensors(item, f"{name}[{i}]", seen_objects)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            if isinstance(item, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
                yield from _named_tensors(item, f"{name}[{key!r}]", seen_objects)


def unmetered(*objects, names=None, meter=None) -> List[Unmetered]:
    """The storages of `objects`' CPU tensors that the meter did not
    allocate, largest first, one entry per storage. An object is a tensor,
    a module (its parameters and buffers), an optimizer (its parameters and
    state), or a list, tuple or dict of those; names[i] names objects[i]
    in the entries (default "arg<i>"). Tensors off the CPU, without storage
    (meta, sparse) or of no bytes are left out."""
    import torch

    m = meter or meter_module.load()
    mappings = None
    found, seen_storages, seen_objects = [], set(), set()
    for i, obj in enumerate(objects):
        name = names[i] if names else f"arg{i}"
        for tensor_name, t in _named_tensors(obj, name, seen_objects):
            if t.device.type != "cpu" or t.layout != torch.strided:
                continue
            try:
                storage = t.untyped_storage()
            except (RuntimeError, NotImplementedError):  # a subclass without one (DTensor)
                continue
            if storage.nbytes() == 0 or storage._cdata in seen_storages:
                continue
            seen_storages.add(storage._cdata)
            if m.allocated(t):
                continue
            if mappings is None:
                mappings = _file_mappings()
            found.append(Unmetered(tensor_name, storage.nbytes(),
                                   _source(storage.data_ptr(), mappings)))
    return sorted(found, key=lambda u: -u.nbytes)


def visible(fn, args, kwargs):
    """What a call fn(*args, **kwargs) shows of its tensors, named: fn
    itself, the object of a bound method, the variables fn reads from
    outside (its closure's, and the module globals its code names, that
    are tensors, modules or optimizers: a training step's model, optimizer
    and batch), the arguments. Functions fn calls are not looked into."""
    import torch

    objects, names = [fn], ["fn"]
    if getattr(fn, "__self__", None) is not None:
        objects.append(fn.__self__)
        names.append("fn.__self__")
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    for var, cell in zip(code.co_freevars if code else (), cells):
        try:
            objects.append(cell.cell_contents)
        except ValueError:  # a cell not yet assigned
            continue
        names.append(var)
    module_globals = getattr(fn, "__globals__", {})
    for var in code.co_names if code else ():
        value = module_globals.get(var)
        if isinstance(value, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
            objects.append(value)
            names.append(var)
    objects += list(args) + list(kwargs.values())
    names += [f"args[{i}]" for i in range(len(args))] + list(kwargs)
    return objects, names


def describe(found, what):
    """One message for `found` (unmetered()), naming the fix."""
    total = sum(u.nbytes for u in found)
    largest = found[0]
    sources = sorted({u.source for u in found})
    return (f"{what}: {len(found)} tensor{'s' if len(found) != 1 else ''} ({total:,} B) the "
            f"meter cannot see, e.g. {largest.name} ({largest.nbytes:,} B): "
            f"{'; '.join(sources[:3])}{' ...' if len(sources) > 3 else ''}. The meter is an "
            f"allocator hook and counts none of their bytes, so the measured peak would be "
            f"short by up to {total:,} B. Copy them into memory it counts first: "
            f"remat_measure.copy_into_meter(model) (for each parameter and buffer: "
            f"p.data = p.data.clone() under torch.no_grad())")


def check(*objects, names=None, what="remat_measure", meter=None):
    """Raises UnmeteredError (one message, naming the fix) when any of
    `objects`' tensors is in memory the meter does not count; see
    unmetered()."""
    found = unmetered(*objects, names=names, meter=meter)
    if found:
        raise UnmeteredError(describe(found, what), found)


def copy_into_meter(*modules, meter=None):
    """Copies each parameter and buffer of `modules` whose memory the meter
    did not allocate (memory-mapped weights) into memory it counts, in
    place (the tensor objects stay, their data is a fresh clone), and
    returns the bytes copied. Tensors that shared such a storage no longer
    share it."""
    import torch

    m = meter or meter_module.load()
    copied = 0
    with torch.no_grad():
        for module in modules:
            for t in list(module.parameters()) + list(module.buffers()):
                if t.device.type != "cpu" or t.layout != torch.strided:
                    continue
                try:
                    if t.untyped_storage().nbytes() == 0 or m.allocated(t):
                        continue
                except (RuntimeError, NotImplementedError):  # no storage (DTensor)
                    continue
                t.data = t.data.clone()
                copied += t.untyped_storage().nbytes()
    return copied
