"""remat.apply's selective checkpoint on blocks with dropout (python/remat/
_selective.py): which draws the recompute makes again, and the random state
it makes them from.

PyTorch's selective checkpoint restores the generator's state of the
forward's start and replays the block; a cached draw does not run there, so
a draw recomputed after it would differ unless the state after the cached
draw is carried over. The policy draws again what the planner drops:
  - attention_core: the attention's dropout with the core (its mask and the
    dropped probabilities), the residual dropouts' masks cached;
  - dropout_mask: the dropouts but SDPA's (its math path's mask cached).
Checked on a tiny BERT (fp32, CPU, dropout 0.1; PyTorch's CPU dropout
draws in place: empty_like, bernoulli_, div_, then a mul) and on a block
whose dropouts are fused (aten.native_dropout, as CUDA's): the recorded
decisions, the carried state, and gradients equal to the plain block's
(the same masks) under every option.

Run by CTest (label "python"); skipped, visibly, without torch or
transformers.
"""
import unittest

import needs

HAVE = not needs.missing("torch", "transformers")
if HAVE:
    import torch
    import transformers

    import remat
    from torch.utils.checkpoint import checkpoint

BERT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
            vocab_size=256, max_position_embeddings=64, hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1)
# fp32 on the same ops in the same order with the same masks: only the
# order of a few reductions may differ (none does here; kept loose enough
# for another CPU's kernels).
RELATIVE = 1e-6


def run_block(block):
    def run(h):
        out = block(h)
        return out[0] if isinstance(out, tuple) else out
    return run


class FusedBlock(torch.nn.Module if HAVE else object):
    """Dropouts by aten.native_dropout (CUDA's fused dropout, here on CPU):
    on the block's input (as a LoRA adapter's), on the attention's
    probabilities, on the attention's output and on the MLP's."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                       torch.nn.Linear(2 * width, width))

    def forward(self, x):
        b, s, w = x.shape
        h = torch.ops.aten.native_dropout(x, 0.1, True)[0]
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        probs = torch.softmax(q @ k.transpose(-1, -2) / (w // self.heads) ** 0.5, dim=-1)
        probs = torch.ops.aten.native_dropout(probs, 0.1, True)[0]
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, w)
        x = x + torch.ops.aten.native_dropout(self.out(ctx), 0.1, True)[0]
        return x + torch.ops.aten.native_dropout(self.mlp(x), 0.1, True)[0]


@needs.modules("torch", "transformers")
class Dropout(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        config = transformers.BertConfig(**BERT)
        config._attn_implementation = "sdpa"  # CPU with dropout: SDPA's math path
        self.bert = transformers.BertModel(config).train().encoder.layer[0]
        self.hidden = torch.randn(2, 16, BERT["hidden_size"])

    def record(self, block, parts):
        scopes = remat._selective.Scopes(block, parts, 0)
        try:
            hidden = self.hidden_for(block).clone().requires_grad_()
            return remat._selective.record(run_block(block), hidden, parts, scopes), scopes
        except Exception:
            scopes.remove()
            raise

    def hidden_for(self, block):
        return self.hidden if block is self.bert else self.hidden[..., :32]

    def gradients(self, block, parts=None):
        """The input's and the parameters' gradients of one backward, from
        the same random state: plain, or under the option's checkpoint."""
        hidden = self.hidden_for(block).clone().requires_grad_()
        block.zero_grad(set_to_none=True)
        scopes = None
        if parts is not None:
            decisions, scopes = self.record(block, parts)
        torch.manual_seed(5)
        if parts is None:
            out = run_block(block)(hidden)
        else:
            out = checkpoint(run_block(block), hidden, use_reentrant=False,
                             context_fn=remat._selective.context_fn(parts, scopes, decisions))
        torch.manual_seed(9)  # the recompute must not draw from the state it finds
        out.pow(2).sum().backward()
        if scopes is not None:
            scopes.remove()
        return [hidden.grad] + [p.grad for p in block.parameters()]

    def assertSameGradients(self, block, parts):
        want = self.gradients(block)
        for got, w in zip(self.gradients(block, parts), want):
            scale = w.abs().max().item()
            self.assertLessEqual((got - w).abs().max().item(), RELATIVE * scale, parts)

    def test_the_attention_dropout_is_drawn_again_with_the_core(self):
        decisions, scopes = self.record(self.bert, ("attention_core",))
        scopes.remove()
        draws = [keep for name, keep, _ in decisions if name == "bernoulli_"]
        self.assertEqual(draws, [False, True, True])  # the core's, then the residual ones
        applied = [i for i, (name, _, _) in enumerate(decisions) if name == "mul"]
        softmax = [i for i, (name, _, _) in enumerate(decisions) if name == "_safe_softmax"]
        self.assertEqual(len(softmax), 1)
        self.assertFalse(decisions[softmax[0]][1])
        # The mul applying the core's mask (the dropped probabilities, which
        # the context matmul saves) is recomputed too.
        after = [i for i in applied if i > softmax[0]]
        self.assertFalse(decisions[after[0]][1])
        self.assertEqual(decisions.resync, frozenset())  # the core's draw is the block's first
        self.assertSameGradients(self.bert, ("attention_core",))

    def test_a_cached_draw_before_a_redrawn_one_carries_the_random_state(self):
        decisions, scopes = self.record(self.bert, ("dropout_mask",))
        scopes.remove()
        draws = [i for i, (name, _, _) in enumerate(decisions) if name == "bernoulli_"]
        self.assertEqual([decisions[i][1] for i in draws], [True, False, False])
        self.assertEqual(decisions.resync, {draws[0]})
        self.assertSameGradients(self.bert, ("dropout_mask",))

    def test_every_option_draws_the_same_masks(self):
        for parts in (("attention_core",), ("mlp_activation",), ("norm_output",),
                      ("dropout_mask",),
                      ("attention_core", "mlp_activation", "norm_output", "dropout_mask")):
            with self.subTest(parts=parts):
                self.assertSameGradients(self.bert, parts)

    def test_fused_dropouts(self):
        block = FusedBlock().train()
        decisions, scopes = self.record(block, ("attention_core",))
        scopes.remove()
        draws = [i for i, (name, _, _) in enumerate(decisions) if name == "native_dropout"]
        # The input's draw is cached, the core's drawn again after it: the
        # state after the input's is carried over.
        self.assertEqual([decisions[i][1] for i in draws], [True, False, True, True])
        self.assertEqual(decisions.resync, {draws[0]})
        decisions, scopes = self.record(block, ("dropout_mask",))
        scopes.remove()
        self.assertEqual([decisions[i][1] for i in draws], [False] * 4)
        self.assertEqual(decisions.resync, frozenset())
        for parts in (("attention_core",), ("dropout_mask",), ("mlp_activation",),
                      ("attention_core", "mlp_activation", "dropout_mask")):
            with self.subTest(parts=parts):
                self.assertSameGradients(block, parts)


if __name__ == "__main__":
    unittest.main()
