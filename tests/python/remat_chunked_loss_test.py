"""python/remat/_chunked_loss.py and _lm_head.py: a plan's chunked loss
(--chunked-loss N) carried out by remat.apply on Hugging Face causal LMs.

- The chunked linear cross-entropy against F.cross_entropy of the whole
  logits, in float64: the loss and the gradients of the input and the
  weight over 1, 3, 7 and more chunks than rows, tokens without a target,
  a given denominator, a frozen weight, and without grad. float64 sums of
  at most 4,096 products: about 12 x 2^-53 = 1.3e-15 of rounding each; 1e-12
  relative leaves a thousandfold margin and catches any wrong term.
- Llama, Mistral and Qwen2 (tied embeddings) causal LMs in float64 under a
  plan with the chunked loss: the loss and every gradient against the same
  model's logits put through F.cross_entropy in float64 with the labels
  shifted as transformers shifts them and -100 ignored; the model returns
  no logits where it computes the loss, full logits without labels; fp32
  against transformers' own loss within 1e-5 (fp32 sums of at most 256
  products reordered by the chunks: about 8 x 2^-24 = 5e-7 each).
- Soft-capped logits (Gemma 2's final_logit_softcapping c): the chunked
  loss of c * tanh(x @ w.T / c) against F.cross_entropy of the whole capped
  logits in float64 (1e-12 as above: tanh and its derivative add a few
  roundings per element); a Gemma 2 causal LM in float64 and fp32 as the
  families above, its head's output a one-element placeholder through the
  soft-cap; and what the chunked loss saves of a metered training step of
  examples/hf/gemma-2-2b.config.json shrunk to 2 layers of hidden 64 with
  its 256,000-token vocabulary (tests/python/remat_chunked_loss_saving.py,
  a child process: the meter loads before torch allocates) equal to what
  remat.plan predicts it saves within 1% (the meter counts every tensor's
  bytes; the 1% is for what the planner's model of the rest of the step
  leaves out, the same in both jobs).
- transformers' num_items_in_batch, return_dict=False, unapply, a PEFT
  LoRA model, and the refusals: a model that is not a causal LM, a head with
  a bias, scaled logits, logits changed between the head and the loss,
  each naming the plan's chunked_loss and chunked_loss=0.

Run by CTest (label "python"); skipped, visibly, without torch or
transformers (tests/python/needs.py), the PEFT case without peft, the
saving without remat's CPU meter.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import needs
import remat

if needs.missing("torch", "transformers"):
    torch = transformers = None
else:
    import torch
    import transformers

FLOAT64 = 1e-12
FP32 = 1e-5
SAVING = 0.01
HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=256, max_position_embeddings=64,
              rms_norm_eps=1e-6, attention_dropout=0.0)
FAMILIES = {
    "llama": dict(COMMON, model_type="llama", architectures=["LlamaForCausalLM"],
                  tie_word_embeddings=False),
    "mistral": dict(COMMON, model_type="mistral", architectures=["MistralForCausalLM"],
                    sliding_window=4096, tie_word_embeddings=False),
    "qwen2": dict(COMMON, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                  tie_word_embeddings=True, use_sliding_window=False),
    # Logits of about 0.1 here (hidden 32, weights of 0.02): a cap of 0.25
    # keeps tanh far from linear, as Gemma 2's 30 is on its trained logits.
    "gemma2": dict(COMMON, model_type="gemma2", architectures=["Gemma2ForCausalLM"],
                   head_dim=8, query_pre_attn_scalar=8, final_logit_softcapping=0.25,
                   attn_logit_softcapping=50.0, sliding_window=4096, tie_word_embeddings=True),
}
SOFTCAP = 5.0
MICRO_BATCH, SEQ_LEN, CHUNKS = 2, 24, 5


def build(cfg, **changes):
    fields = {k: v for k, v in dict(cfg, **changes).items()
              if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.config.use_cache = False
    return model.train()


def relative_error(got, want):
    """The largest |difference| over the largest |want| (the difference
    itself where want is all zeros: a LoRA A before B has trained)."""
    scale = want.abs().max().item()
    error = (got - want).abs().max().item()
    return error / scale if scale > 0 else error


@needs.modules("torch", "transformers")
class LinearCrossEntropy(unittest.TestCase):
    def reference(self, x, w, targets, denominator=None, softcap=None):
        logits = x @ w.t()
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100,
                                                 reduction="sum")
        count = denominator if denominator is not None else (targets != -100).sum()
        return loss / count

    def case(self, n=37, hidden=16, vocab=50):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(n, hidden, dtype=torch.float64, generator=g)
        w = torch.randn(vocab, hidden, dtype=torch.float64, generator=g)
        targets = torch.randint(0, vocab, (n,), generator=g)
        targets[[0, 5, n - 1]] = -100
        return x, w, targets

    def compare(self, chunks, denominator=None, frozen=False, softcap=None):
        from remat._chunked_loss import linear_cross_entropy

        x, w, targets = self.case()
        got_x, got_w = x.clone().requires_grad_(), w.clone().requires_grad_(not frozen)
        want_x, want_w = x.clone().requires_grad_(), w.clone().requires_grad_(not frozen)
        got = linear_cross_entropy(got_x, got_w, targets, chunks, denominator, softcap=softcap)
        want = self.reference(want_x, want_w, targets, denominator, softcap)
        self.assertEqual(got.dtype, torch.float64)
        self.assertLessEqual(abs(got.item() - want.item()), FLOAT64 * abs(want.item()))
        (got * 0.7).backward()
        (want * 0.7).backward()
        self.assertLessEqual(relative_error(got_x.grad, want_x.grad), FLOAT64)
        if frozen:
            self.assertIsNone(got_w.grad)
        else:
            self.assertLessEqual(relative_error(got_w.grad, want_w.grad), FLOAT64)

    def test_the_loss_and_gradients_equal_the_whole_logits(self):
        for chunks in (1, 3, 7, 37, 100):
            with self.subTest(chunks=chunks):
                self.compare(chunks)

    def test_a_given_denominator_and_a_frozen_weight(self):
        self.compare(4, denominator=11)
        self.compare(4, frozen=True)

    def test_without_grad_only_the_loss(self):
        from remat._chunked_loss import linear_cross_entropy

        x, w, targets = self.case()
        for softcap in (None, SOFTCAP):
            with torch.no_grad():
                got = linear_cross_entropy(x, w, targets, 6, softcap=softcap)
            want = self.reference(x, w, targets, softcap=softcap)
            self.assertFalse(got.requires_grad)
            self.assertLessEqual(abs(got.item() - want.item()), FLOAT64 * abs(want.item()))

    def test_soft_capped_logits_equal_the_whole_capped_logits(self):
        # Logits of about 4 (hidden 16, unit weights) against a cap of 5:
        # tanh far from linear, its gradient 1 - t^2 far from 1.
        for chunks in (1, 3, 7, 37, 100):
            with self.subTest(chunks=chunks):
                self.compare(chunks, softcap=SOFTCAP)
        self.compare(4, denominator=11, frozen=True, softcap=SOFTCAP)


@needs.modules("torch", "transformers")
class CausalLM(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def plan(self, family, chunks=CHUNKS, **options):
        path = os.path.join(self.dir.name, family + ".json")
        with open(path, "w") as f:
            json.dump(FAMILIES[family], f)
        return remat.plan(path, budget="1GB", micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                          precision="fp32", device="cpu", attention="eager",
                          chunked_loss=chunks, **dict({"strategy": "none"}, **options))

    def batch(self, cfg):
        g = torch.Generator().manual_seed(5)
        ids = torch.randint(0, cfg["vocab_size"], (MICRO_BATCH, SEQ_LEN), generator=g)
        labels = ids.clone()
        labels[0, :4] = -100
        labels[1, 10] = -100
        return ids, labels

    def grads(self, model):
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    def reference(self, model, ids, labels):
        """float64: the model's whole logits through F.cross_entropy, labels
        shifted by one, -100 ignored, the mean over the tokens with a
        target."""
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids).logits
        vocab = logits.shape[-1]
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab),
                                                 labels[:, 1:].reshape(-1), ignore_index=-100)
        loss.backward()
        return loss.item(), self.grads(model)

    def test_the_loss_and_gradients_equal_float64_whole_logits(self):
        for family, cfg in FAMILIES.items():
            with self.subTest(family=family):
                model = build(cfg).double()
                ids, labels = self.batch(cfg)
                want_loss, want = self.reference(model, ids, labels)
                plan = self.plan(family)
                self.assertEqual(plan.json["job"]["loss_chunks"], CHUNKS)
                remat.apply(model, plan)
                model.zero_grad(set_to_none=True)
                out = model(input_ids=ids, labels=labels)
                self.assertIsNone(out.logits)  # no tokens x vocab tensor
                self.assertEqual(out.loss.dtype, torch.float64)
                out.loss.backward()
                got = self.grads(model)
                self.assertLessEqual(abs(out.loss.item() - want_loss), FLOAT64 * abs(want_loss))
                self.assertEqual(sorted(got), sorted(want))
                for name in want:
                    self.assertLessEqual(relative_error(got[name], want[name]), FLOAT64, name)
                with torch.no_grad():  # without labels: the head as it is
                    self.assertEqual(model(input_ids=ids).logits.shape,
                                     (MICRO_BATCH, SEQ_LEN, cfg["vocab_size"]))
                remat.unapply(model)

    def test_fp32_equals_transformers_own_loss(self):
        for family in ("qwen2", "gemma2"):
            with self.subTest(family=family):
                cfg = FAMILIES[family]
                model = build(cfg)
                ids, labels = self.batch(cfg)
                model.zero_grad(set_to_none=True)
                want_loss = model(input_ids=ids, labels=labels).loss
                want_loss.backward()
                want = self.grads(model)
                remat.apply(model, self.plan(family))
                model.zero_grad(set_to_none=True)
                loss = model(input_ids=ids, labels=labels).loss
                loss.backward()
                self.assertLessEqual(abs(loss.item() - want_loss.item()),
                                     FP32 * abs(want_loss.item()))
                got = self.grads(model)
                for name in want:
                    self.assertLessEqual(relative_error(got[name], want[name]), FP32, name)
                remat.unapply(model)

    def test_soft_capped_logits_take_no_tokens_x_vocab_tensor(self):
        # Gemma 2 divides, tanhs and multiplies what its head returned: each
        # step on the placeholder is another placeholder, one element each.
        cfg = FAMILIES["gemma2"]
        model = build(cfg)
        remat.apply(model, self.plan("gemma2"))
        seen = []
        handle = model.lm_head.register_forward_hook(lambda m, i, o: seen.append(o))
        ids, labels = self.batch(cfg)
        try:
            out = model(input_ids=ids, labels=labels)
        finally:
            handle.remove()
            remat.unapply(model)
        self.assertIsNone(out.logits)
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0].untyped_storage().nbytes(), 4)
        self.assertEqual(seen[0].shape, (MICRO_BATCH, SEQ_LEN, cfg["vocab_size"]))

    def test_num_items_in_batch_and_tuples_as_transformers_returns_them(self):
        cfg = FAMILIES["llama"]
        model = build(cfg).double()
        ids, labels = self.batch(cfg)
        items = torch.tensor(100)
        with torch.no_grad():
            want = model(input_ids=ids, labels=labels, num_items_in_batch=items).loss
        remat.apply(model, self.plan("llama"))
        with torch.no_grad():
            got = model(input_ids=ids, labels=labels, num_items_in_batch=items)
            plain = model(input_ids=ids, labels=labels)
            tuple_out = model(input_ids=ids, labels=labels, return_dict=False)
        # transformers' sum over the given count, in fp32 logits: fp32 rounding.
        self.assertLessEqual(abs(got.loss.item() - want.item()), FP32 * abs(want.item()))
        self.assertNotAlmostEqual(got.loss.item(), plain.loss.item(), places=3)
        self.assertIsInstance(tuple_out, tuple)
        self.assertIsNone(tuple_out[1])
        self.assertEqual(tuple_out[0].item(), plain.loss.item())
        remat.unapply(model)

    def test_unapply_restores_the_model(self):
        cfg = FAMILIES["llama"]
        model = build(cfg)
        remat.apply(model, self.plan("llama"))
        remat.unapply(model)
        self.assertNotIn("forward", model.__dict__)
        self.assertNotIn("forward", model.lm_head.__dict__)
        self.assertNotIn("_loss_function", model.__dict__)
        ids, labels = self.batch(cfg)
        self.assertIsNotNone(model(input_ids=ids, labels=labels).logits)

    def test_a_peft_lora_model(self):
        needs.skip_without(self, "peft")
        import peft

        cfg = FAMILIES["llama"]
        model = peft.get_peft_model(build(cfg), peft.LoraConfig(
            r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
            task_type="CAUSAL_LM"))
        ids, labels = self.batch(cfg)
        model.zero_grad(set_to_none=True)
        want_loss = model(input_ids=ids, labels=labels).loss
        want_loss.backward()
        want = self.grads(model)
        plan = self.plan("llama", lora_rank=4, lora_targets="q,v")
        remat.apply(model, plan)
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=labels)
        self.assertIsNone(out.logits)
        out.loss.backward()
        got = self.grads(model)
        self.assertEqual(sorted(got), sorted(want))
        for name in want:
            self.assertLessEqual(relative_error(got[name], want[name]), FP32, name)
        remat.unapply(model)

    def assertRefused(self, model, plan, why):
        with self.assertRaises(remat.InputError) as raised:
            remat.apply(model, plan)
        message = str(raised.exception)
        self.assertIn(f"chunked_loss {CHUNKS}", message)
        self.assertIn("plan with chunked_loss=0", message)
        self.assertIn(why, message)
        self.assertEqual(message.count("\n"), 0)

    def test_a_model_that_is_not_a_causal_lm_is_refused(self):
        bert = transformers.BertForMaskedLM(transformers.BertConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            vocab_size=256))
        plan = dict(self.plan("llama").json)
        plan["model"] = dict(plan["model"], parameters=None)  # another model: its blocks only
        self.assertRefused(bert, plan, "is not one")

    def test_a_head_with_a_bias_is_refused(self):
        model = build(FAMILIES["llama"])
        model.lm_head = torch.nn.Linear(32, 256, bias=True)
        plan = dict(self.plan("llama").json)
        plan["model"] = dict(plan["model"], parameters=None)
        self.assertRefused(model, plan, "with a bias")

    def test_scaled_logits_are_refused(self):
        model = build(FAMILIES["llama"])
        model.config.logit_scale = 0.0625  # Cohere's
        self.assertRefused(model, self.plan("llama"), "logit_scale 0.0625")

    def test_logits_changed_between_the_head_and_the_loss_are_refused(self):
        cfg = FAMILIES["llama"]
        model = build(cfg)
        remat.apply(model, self.plan("llama"))
        handle = model.lm_head.register_forward_hook(lambda m, i, o: o * 2.0)
        ids, labels = self.batch(cfg)
        try:
            with self.assertRaises(remat.InputError) as raised:
                model(input_ids=ids, labels=labels)
        finally:
            handle.remove()
            remat.unapply(model)
        self.assertIn("got other logits than its head returned", str(raised.exception))
        self.assertIn("plan with chunked_loss=0", str(raised.exception))


@needs.modules("torch", "transformers")
class SoftCappedSaving(unittest.TestCase):
    def test_the_metered_saving_is_the_predicted_one(self):
        needs.skip_without_meter(self)
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-W", "ignore",
                                os.path.join(HERE, "remat_chunked_loss_saving.py"), tmp],
                               capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        plain, chunked = [json.loads(line) for line in r.stdout.splitlines()
                          if line.startswith('{"chunked_loss"')]
        self.assertEqual((plain["loss_chunks"], chunked["loss_chunks"]), (0, 8))
        want = plain["predicted_peak_bytes"] - chunked["predicted_peak_bytes"]
        got = plain["measured_peak_bytes"] - chunked["measured_peak_bytes"]
        print(f"soft-capped chunked loss saves {got} bytes measured, {want} predicted",
              file=sys.stderr)
        self.assertGreater(want, 0)
        self.assertLessEqual(abs(got - want), SAVING * want)


if __name__ == "__main__":
    unittest.main()
