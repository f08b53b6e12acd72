"""A plan's chunked loss (`job.loss_chunks`, --chunked-loss N) carried out on
a Hugging Face causal LM: its own lm_head weight and its own causal-LM loss,
computed by _chunked_loss.linear_cross_entropy over N chunks of the tokens.

In a forward given `labels` the head's forward records its input (the final
hidden states) and returns a placeholder (its logits' shape in one element
of memory); the model's loss function (`loss_function`, set on the
instance) finds that placeholder and computes the loss from the recorded
hidden states, the labels shifted as transformers' ForCausalLMLoss shifts
them (or its `shift_labels`), ignore_index -100, over the tokens with a
target or transformers' `num_items_in_batch`. The model (its forward replaced
on the instance) returns that loss and `logits` None: no tokens x vocab tensor exists. A forward without
labels runs the head as it is (full logits, e.g. generation).

A model that soft-caps its logits between the head and the loss (Gemma 2:
logits / c, tanh, * c with c its final_logit_softcapping) does so on the
placeholder, a tensor subclass (_placeholder_type) whose division and
multiplication by a number and tanh return another placeholder recording
the step, nothing computed; the loss finds that record, and the chunked
loss soft-caps each chunk with c.

Refused (InputError, one line naming the plan's chunked_loss and
`chunked_loss=0`): a model that is not a transformers causal LM whose loss
is ForCausalLM (find_causal_lm), a head that is not a bias-free nn.Linear,
scaled logits (`logit_scale`, `logits_scaling`); and, at the forward, a
model whose loss does not get the head's output as the head returned it or
soft-capped as above (it changes the logits otherwise in between)."""
import inspect

from ._chunked_loss import linear_cross_entropy
from ._planner import EXIT_BAD_INPUT, InputError

# config.json keys of families that scale the logits between the head and
# the loss (Cohere's and Granite's), which the chunked loss does not.
LOGIT_TRANSFORMS = ("logit_scale", "logits_scaling")
# What a placeholder records of the steps taken on it, by torch function name.
_STEPS = {"div": "div", "true_divide": "div", "__truediv__": "div", "mul": "mul",
          "multiply": "mul", "__mul__": "mul", "__rmul__": "mul", "tanh": "tanh"}
_PLACEHOLDER = []


def _placeholder_type():
    """The placeholder's tensor subclass, made once (torch is imported on
    first use): `steps` records (step, number) for each division or
    multiplication by a number and each tanh taken on it (the result another
    placeholder, nothing computed); any other function runs on the plain
    tensor and returns plain tensors."""
    if _PLACEHOLDER:
        return _PLACEHOLDER[0]
    import numbers

    import torch

    class Placeholder(torch.Tensor):
        steps = ()
        head = None

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            step = _STEPS.get(getattr(func, "__name__", None))
            others = [a for a in args if not isinstance(a, Placeholder)]
            if step and not kwargs and args and isinstance(args[0], Placeholder) and (
                    (step == "tanh" and len(args) == 1) or
                    (step != "tanh" and len(args) == 2 and len(others) == 1
                     and isinstance(others[0], numbers.Real)
                     and not isinstance(others[0], bool))):
                return args[0].then(step, float(others[0]) if others else None)
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

        def then(self, step, number):
            with torch._C.DisableTorchFunctionSubclass():
                out = self.new_zeros(()).expand(self.shape).as_subclass(Placeholder)
            out.steps, out.head = self.steps + ((step, number),), self.head
            return out

    _PLACEHOLDER.append(Placeholder)
    return Placeholder


def _softcap_of(steps):
    """The soft-cap c where `steps` are / c, tanh, * c (Gemma2ForCausalLM's),
    0 where there are none, None for anything else."""
    if not steps:
        return 0.0
    if (len(steps) == 3 and [s for s, _ in steps] == ["div", "tanh", "mul"]
            and steps[0][1] == steps[2][1] and steps[0][1] > 0):
        return steps[0][1]
    return None


def _refuse(chunks, why):
    return InputError(
        f"remat.apply: the plan computes the loss in {chunks} chunks (chunked_loss {chunks}), "
        f"which remat.apply carries out on a transformers causal LM's linear head and "
        f"cross-entropy; {why}: plan with chunked_loss=0", EXIT_BAD_INPUT)


def find_causal_lm(model, chunks):
    """The transformers causal LM inside `model` (the model itself, or what
    a PEFT wrapper holds): the one PreTrainedModel whose loss is
    ForCausalLM. Raises InputError naming why it cannot carry the chunked
    loss."""
    try:
        import transformers
    except ImportError:
        raise _refuse(chunks, f"{type(model).__name__} is not one (transformers is not "
                              "installed)")
    found = [m for m in model.modules() if isinstance(m, transformers.PreTrainedModel)
             and getattr(m, "loss_type", None) == "ForCausalLM"
             and m.get_output_embeddings() is not None]
    found = [m for m in found if not any(o is not m and m in list(o.modules()) for o in found)]
    if len(found) != 1:
        raise _refuse(chunks, f"{type(model).__name__} is not one (no transformers model with "
                              "an lm_head and the ForCausalLM loss)" if not found else
                      f"{type(model).__name__} holds {len(found)} causal LMs")
    lm = found[0]
    import torch

    head = lm.get_output_embeddings()
    if type(head) is not torch.nn.Linear or head.bias is not None:
        raise _refuse(chunks, f"{type(lm).__name__}'s head is a {type(head).__name__}"
                              f"{' with a bias' if type(head) is torch.nn.Linear else ''}, "
                              "not a bias-free nn.Linear")
    for key in LOGIT_TRANSFORMS:
        value = getattr(lm.config, key, None)
        if value not in (None, 0, 1, 1.0):
            raise _refuse(chunks, f"{type(lm).__name__} changes its logits before the loss "
                                  f"({key} {value})")
    if "_loss_function" in lm.__dict__:
        raise _refuse(chunks, f"{type(lm).__name__} has a loss function of its own "
                              "(loss_function set)")
    return lm


class ChunkedHead:
    """The chunked loss installed on one causal LM: the head's forward, the
    instance's loss_function and two hooks on the model; remove() undoes
    them."""

    def __init__(self, lm, chunks):
        self.lm, self.chunks = lm, int(chunks)
        self.head = lm.get_output_embeddings()
        self.labels_at = _labels_position(lm.forward)
        self.armed = False  # this forward has labels: the head defers to the loss
        self.hidden = self.placeholder = None
        self.consumed = False
        self.saved_head = self.head.__dict__.get("forward")
        self.head.forward = self.head_forward
        self.original_loss = lm.loss_function
        lm.loss_function = self.loss_function
        # The model's forward replaced on the instance (not a module hook:
        # PEFT's wrappers call the inner model's .forward directly).
        self.saved_forward = lm.__dict__.get("forward")
        self.forward = lm.forward
        lm.forward = self.model_forward

    def remove(self):
        for module, saved in ((self.head, self.saved_head), (self.lm, self.saved_forward)):
            if saved is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = saved
        self.lm.__dict__.pop("_loss_function", None)

    def model_forward(self, *args, **kwargs):
        labels = kwargs.get("labels")
        if labels is None and self.labels_at is not None and len(args) > self.labels_at:
            labels = args[self.labels_at]
        self.armed, self.consumed = labels is not None, False
        self.hidden = self.placeholder = None
        try:
            output = self.forward(*args, **kwargs)
        finally:
            armed, consumed = self.armed, self.consumed
            self.armed, self.hidden, self.placeholder = False, None, None
        return self.after(armed, consumed, output)

    def head_forward(self, hidden):
        if not self.armed:
            return type(self.head).forward(self.head, hidden)
        if self.hidden is not None:
            self.armed = False
            raise InputError(
                f"remat.apply: {type(self.lm).__name__} called its head twice in one forward; "
                f"remat.apply's chunked loss (chunked_loss {self.chunks}) expects one call: plan "
                "with chunked_loss=0", EXIT_BAD_INPUT)
        self.hidden = hidden
        shape = tuple(hidden.shape[:-1]) + (self.head.out_features,)
        import torch

        with torch._C.DisableTorchFunctionSubclass():
            self.placeholder = hidden.new_zeros(()).expand(shape).as_subclass(
                _placeholder_type())
        self.placeholder.head = self
        return self.placeholder

    def loss_function(self, logits, labels, vocab_size=None, num_items_in_batch=None,
                      ignore_index=-100, shift_labels=None, **kwargs):
        if not self.armed or self.placeholder is None:
            return self.original_loss(logits=logits, labels=labels, vocab_size=vocab_size,
                                      num_items_in_batch=num_items_in_batch,
                                      ignore_index=ignore_index, shift_labels=shift_labels,
                                      **kwargs)
        steps = getattr(logits, "steps", None) if getattr(logits, "head", None) is self else None
        softcap = _softcap_of(steps) if steps is not None else None
        if softcap is None:
            self.armed = False
            raise InputError(
                f"remat.apply: {type(self.lm).__name__}'s loss got other logits than its head "
                f"returned (the model changes them in between); remat.apply's chunked loss "
                f"(chunked_loss {self.chunks}) computes the head and the loss together: plan "
                "with chunked_loss=0", EXIT_BAD_INPUT)
        import torch

        hidden, self.hidden, self.placeholder = self.hidden, None, None
        self.consumed = True
        if shift_labels is None:
            padded = torch.nn.functional.pad(labels, (0, 1), value=ignore_index)
            shift_labels = padded[..., 1:]
        targets = shift_labels.reshape(-1).to(hidden.device)
        x = hidden.reshape(-1, hidden.shape[-1])
        return linear_cross_entropy(x, self.head.weight, targets, self.chunks,
                                    num_items_in_batch, ignore_index, softcap)

    def after(self, armed, consumed, output):
        if not armed:
            return output
        if not consumed:
            raise InputError(
                f"remat.apply: {type(self.lm).__name__}'s forward took labels and computed no "
                f"loss from its head's output; remat.apply's chunked loss (chunked_loss "
                f"{self.chunks}) needs the model's own loss: plan with chunked_loss=0",
                EXIT_BAD_INPUT)
        if isinstance(output, tuple):  # return_dict=False: (loss, logits, ...)
            return (output[0], None) + tuple(output[2:])
        if hasattr(output, "keys") and "logits" in output.keys():
            output["logits"] = None
        return output


def _labels_position(forward):
    """The position of `labels` among a bound forward's positional arguments."""
    try:
        names = list(inspect.signature(forward).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("labels") if "labels" in names else None
