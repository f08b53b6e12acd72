"""Selective recompute of one block with PyTorch's selective activation
checkpoint (torch.utils.checkpoint.create_selective_checkpoint_contexts):
the ops of the plan's option are PREFER_RECOMPUTE, every other op MUST_SAVE.

  attention_core  the attention's core: the score and context matmuls
                  (aten.bmm/baddbmm), the softmax and the fused attention
                  kernels (aten._scaled_dot_product_*);
  mlp_activation  every op inside the block's MLP module except its
                  matmuls (GELU, SiLU and SwiGLU's product);
  norm_output     every op inside the block's norm modules;
  dropout_mask    the dropouts: they draw again from the random state that
                  checkpoint restores.
Views (view, transpose, expand, _unsafe_view, ...) are always
recomputed: they cost nothing, and a cached view would keep its base, a
recomputed op's output, alive.
A random op that draws (a dropout with p > 0) is recomputed only under
dropout_mask, and only when it is not in place: a cached draw does not
advance the generator in the recompute, so a later recomputed draw would
differ. An in-place op is cached like any other, its cache entry being the
tensor it mutated as the forward left it (allow_cache_entry_mutation): a
dropout decomposed into empty_like, bernoulli_, div_ (PyTorch's CPU
dropout, SDPA's math backend) keeps its mask under every option; a fused
one (aten.native_dropout, the fused attention kernels) is drawn again under
dropout_mask. A block with a kept in-place draw before a fused one is
refused under dropout_mask.
The module scopes come from forward hooks on the MLP and norm modules,
which fire again in the recompute.
"""
import functools

from ._blocks import mlp_of, norms_of
from ._segments import _error

_CORE = ("bmm", "baddbmm", "_softmax", "_safe_softmax", "softmax")
_CORE_PREFIX = ("_scaled_dot_product", "_efficient_attention", "_flash_attention")
_MATMUL = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv")


def _name(func):
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def _draws(func, args, kwargs):
    """Whether the op draws random numbers in this call."""
    import torch

    if torch.Tag.nondeterministic_seeded not in getattr(func, "tags", ()):
        return False
    schema = func._schema.arguments
    for position, arg in enumerate(schema):
        if arg.name in ("p", "dropout_p", "train"):
            value = args[position] if position < len(args) else kwargs.get(arg.name, arg.default_value)
            if value is not None and not value:
                return False
    return True


def _is_view(func, name):
    if name in ("_unsafe_view", "view", "reshape", "t", "transpose", "expand", "permute",
                "squeeze", "unsqueeze", "slice", "select", "split", "chunk", "unbind", "alias"):
        return True
    schema = getattr(func, "_schema", None)
    return bool(schema and not schema.is_mutable and schema.returns
                and all(r.alias_info is not None for r in schema.returns))


class Scopes:
    """Which of a block's MLP / norm modules is running (a depth count each),
    kept by forward hooks; remove() takes the hooks off again."""

    def __init__(self, block, parts, index):
        self.depth = {"mlp": 0, "norm": 0}
        self.handles = []
        if "mlp_activation" in parts:
            mlp = mlp_of(block)
            if mlp is None:
                raise _error(f"block{index} ({type(block).__name__}) has no MLP module (mlp, "
                             "intermediate, ffn) for the selective option mlp_activation")
            self._watch(mlp, "mlp")
        if "norm_output" in parts:
            norms = norms_of(block)
            if not norms:
                raise _error(f"block{index} ({type(block).__name__}) has no norm module for "
                             "the selective option norm_output")
            for norm in norms:
                self._watch(norm, "norm")

    def _watch(self, module, scope):
        def enter(*_):
            self.depth[scope] += 1

        def leave(*_):
            self.depth[scope] -= 1

        self.handles.append(module.register_forward_pre_hook(enter))
        self.handles.append(module.register_forward_hook(leave, always_call=True))

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []


def policy(parts, scopes):
    """The SAC policy function for a block under option `parts`."""
    from torch.utils.checkpoint import CheckpointPolicy

    cached_draws = []

    def decide(ctx, func, *args, **kwargs):
        name = _name(func)
        if _is_view(func, name):
            recompute = True  # free to redo; a cached view would pin its base
        elif _draws(func, args, kwargs):
            # In place (bernoulli_ into an empty_like): cached with the tensor
            # it fills, which later in-place ops finish.
            recompute = "dropout_mask" in parts and not func._schema.is_mutable
            if not recompute:
                cached_draws.append(name)
            elif cached_draws and not ctx.is_recompute:
                raise _error(
                    f"selective option dropout_mask: this block draws in place ({cached_draws[0]}, "
                    f"kept) before a dropout it would draw again ({name}): the recompute would "
                    "draw other numbers; plan without dropout_mask for this model")
        elif "attention_core" in parts and (name in _CORE or name.startswith(_CORE_PREFIX)):
            recompute = True
        elif scopes.depth["mlp"] > 0 and name not in _MATMUL:
            recompute = True
        elif scopes.depth["norm"] > 0:
            recompute = True
        else:
            recompute = False
        return CheckpointPolicy.PREFER_RECOMPUTE if recompute else CheckpointPolicy.MUST_SAVE

    return decide


def context_fn(parts, scopes):
    """checkpoint's context_fn for the option."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return functools.partial(create_selective_checkpoint_contexts, policy(parts, scopes),
                             allow_cache_entry_mutation=True)
