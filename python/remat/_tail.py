"""The final norm and the head where a plan's segment holds them (the final
norm's `checkpoint` or `recompute`, the head's `recompute` after it):
remat.apply replaces their forwards, as it replaces the blocks'.

A segment that starts at a block and ends at the final norm or the head runs
them last inside its checkpoint (apply._Segment), which returns the last
block's output and the segment's last output; Tail hands them out: the
last block returns its output, the final norm given that output returns
the norm's (or, where the segment holds the head, a placeholder: its shape
in one element of memory), the head given that placeholder returns the
head's. A segment that starts at the final norm keeps the norm's input: the
norm runs under a checkpoint of its own, or, where the segment holds the
head, records its input and returns a placeholder, and the head runs the
norm and itself under one checkpoint of that input.

A model that changes the last block's output before its final norm, or the
norm's output before its head (except transformers' full slice for
logits_to_keep 0), is refused at its first forward with grad. Without grad
the modules run as they are.
"""
from ._planner import EXIT_BAD_INPUT, InputError


def _refuse(what):
    return InputError(
        f"remat.apply: the plan recomputes the final norm{' and the head' if 'head' in what else ''}"
        f" in one segment, and {what} (the model changes it in between, or calls it "
        "elsewhere); plan without a checkpoint on the final norm", EXIT_BAD_INPUT)


def _is_placeholder(hidden, placeholder):
    """hidden is the placeholder, or a view of all of it (transformers'
    hidden_states[:, slice(0, None), :] before its head)."""
    if hidden is placeholder:
        return True
    base = getattr(hidden, "_base", None)
    return (base is not None and base is placeholder._base
            and tuple(hidden.shape) == tuple(placeholder.shape))


class Tail:
    """One segment's final norm (and head, with_head): the modules' own
    forwards and the values between their calls within one forward."""

    def __init__(self, norm, head, with_head):
        self.norm, self.head = norm.forward, (head.forward if head is not None else None)
        self.with_head = with_head
        self.block = self.result = None  # from the blocks' checkpoint (ran)
        self.input = None  # the norm's input, in a segment that starts at it
        self.placeholder = None  # the norm's output as the head gets it

    def ran(self, block, result):
        """The blocks' checkpoint ran: the last block's hidden state as it
        returned it and the segment's last output (the norm's or the
        head's)."""
        self.block, self.result = block, result

    def _placeholder(self, hidden):
        self.placeholder = hidden.new_zeros(()).expand(hidden.shape)
        return self.placeholder

    def norm_forward(self, hidden):
        """The final norm's forward in a segment from the blocks."""
        import torch

        block, self.block = self.block, None
        if block is None and not torch.is_grad_enabled():
            return self.norm(hidden)
        if block is None or hidden is not block:
            raise _refuse("the final norm's input is not the last block's output as it "
                          "returned it")
        if not self.with_head:
            result, self.result = self.result, None
            return result
        return self._placeholder(hidden)

    def norm_alone(self, hidden):
        """The final norm's forward in a segment that starts at it."""
        import torch
        from torch.utils.checkpoint import checkpoint

        if not torch.is_grad_enabled():
            return self.norm(hidden)
        if not self.with_head:
            return checkpoint(self.norm, hidden, use_reentrant=False)
        self.input = hidden
        return self._placeholder(hidden)

    def head_forward(self, hidden):
        """The head's forward in a segment that holds it."""
        import torch
        from torch.utils.checkpoint import checkpoint

        placeholder, self.placeholder = self.placeholder, None
        if placeholder is None and not torch.is_grad_enabled():
            return self.head(hidden)
        if placeholder is None or not _is_placeholder(hidden, placeholder):
            self.input = self.result = None
            raise _refuse("the head's input is not the final norm's output as it returned it")
        if self.input is not None:  # the segment starts at the norm
            start, self.input = self.input, None
            return checkpoint(lambda x: self.head(self.norm(x)), start, use_reentrant=False)
        result, self.result = self.result, None
        return result
