"""Where an offloaded checkpoint's kept input lives between its forward and
its recompute: host memory, moved by PyTorch's saved-tensor hooks.

A non-reentrant torch.utils.checkpoint saves its inputs for the backward
through the saved-tensor hooks around the checkpoint call (everything its
function saves goes through the checkpoint's own hooks instead), so hooks
around the call move exactly the segment's kept input, as transformers'
`activation_checkpointing_enable(offload=True)` moves it with
torch.autograd.graph.save_on_cpu. remat.apply's hooks also follow the
plan's schedule (remat/schedule/schedule.h: offload after the forward,
prefetch one segment ahead): a checkpoint's input comes back when the
backward reaches the checkpoint after it (its recompute unpacks), so that
on an accelerator the copy in overlaps that segment's work.

  CUDA: pinned host memory and a side stream, as the runtime's host pool
      (runtime/src/host_pool.h): a copy out waits for the compute stream,
      runs on the side stream, and the device storage is marked used by
      it (record_stream) so that its bytes are reused only after the copy;
      a copy in runs on the side stream and its reader waits for it (an
      event) where the recompute unpacks it.
  CPU: the device and the host are the same memory, so the copy goes to a
      buffer outside PyTorch's CPU allocator (a NumPy array), the stand-in
      for host memory that remat's CPU meter does not count, as the
      runtime's host pool does on a CPU; the copy in allocates through
      PyTorch's allocator again. The device bytes then move as they would
      on a GPU: the kept input leaves after its forward and comes back one
      segment ahead of its recompute.
"""


class HostQueue:
    """The offloaded checkpoints of one forward, in forward order. Every
    checkpoint of a pass with offloads runs under hooks(offload): an
    offloaded one's input is copied out; any checkpoint's unpack (its
    recompute starting) brings back the offloaded checkpoint before it."""

    def __init__(self):
        self.entries = []  # _Entry per checkpoint, in forward order

    def hooks(self, device, offload):
        import torch

        def pack(tensor):
            if tensor.device != device or tensor.numel() == 0 or tensor.is_sparse:
                return tensor  # the checkpoint's placeholders, or nothing to move
            entry = _Entry(self, len(self.entries), tensor, offload)
            self.entries.append(entry)
            return entry

        def unpack(entry):
            if not isinstance(entry, _Entry):
                return entry
            return entry.take()

        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def prefetch_before(self, index):
        """Starts bringing back the nearest offloaded checkpoint before
        entry `index` (the next the backward reaches)."""
        for entry in reversed(self.entries[:index]):
            if entry.offloaded:
                entry.prefetch()
                return
            if entry.device_tensor is not None:
                return  # a checkpoint kept on the device comes first


class _Entry:
    def __init__(self, queue, index, tensor, offload):
        self.queue, self.index = queue, index
        self.device = tensor.device
        self.offloaded = offload
        self.device_tensor = None if offload else tensor
        self.host = _copy_out(tensor) if offload else None
        self.event = None

    def prefetch(self):
        if self.host is not None and self.device_tensor is None:
            self.device_tensor, self.event = _copy_in(self.host, self.device)
            self.host = None

    def take(self):
        self.prefetch()
        self.queue.prefetch_before(self.index)
        tensor, self.device_tensor = self.device_tensor, None
        if self.event is not None:
            import torch

            torch.cuda.current_stream(self.device).wait_event(self.event)
            tensor.record_stream(torch.cuda.current_stream(self.device))
            self.event = None
        self.queue.entries[self.index] = _Taken
        return tensor


class _Taken:
    """An entry already unpacked (its recompute ran)."""
    offloaded = False
    device_tensor = None

    @staticmethod
    def prefetch():
        pass


def _layout(tensor):
    return tensor.dtype, tensor.size(), tensor.stride(), tensor.storage_offset()


def _copy_out(tensor):
    """The tensor's whole storage in host memory, with its layout."""
    import torch

    storage = tensor.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage)
    if tensor.device.type == "cpu":
        import numpy

        host = torch.from_numpy(numpy.empty(storage.nbytes(), dtype=numpy.uint8))
        host.copy_(raw)
        return host, _layout(tensor)
    side = _side_stream(tensor.device)
    host = torch.empty(storage.nbytes(), dtype=torch.uint8, pin_memory=True)
    side.wait_stream(torch.cuda.current_stream(tensor.device))
    with torch.cuda.stream(side):
        host.copy_(raw, non_blocking=True)
    raw.record_stream(side)
    done = torch.cuda.Event()
    done.record(side)
    return (host, done), _layout(tensor)


def _copy_in(packed, device):
    """(the tensor in device memory, the event its reader waits for)."""
    import torch

    host, (dtype, size, stride, offset) = packed
    if device.type == "cpu":
        storage = host.clone().untyped_storage()
        return torch.empty(0, dtype=dtype).set_(storage, offset, size, stride), None
    host, out_done = host
    side = _side_stream(device)
    with torch.cuda.stream(side):
        side.wait_event(out_done)
        raw = host.to(device, non_blocking=True)
        done = torch.cuda.Event()
        done.record(side)
    tensor = torch.empty(0, dtype=dtype, device=device).set_(raw.untyped_storage(), offset, size,
                                                             stride)
    return tensor, done


_SIDE = {}


def _side_stream(device):
    import torch

    if device not in _SIDE:
        _SIDE[device] = torch.cuda.Stream(device)
    return _SIDE[device]
