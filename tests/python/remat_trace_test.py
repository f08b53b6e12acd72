"""python/remat/_trace*.py: remat.trace, a training step traced with fake
tensors, against real training steps metered by remat's CPU meter.

  - ModernBERT (from its config.json, transformers' masked-LM class)
    trained for one AdamW step by transformers without and with its
    gradient checkpointing, metered: the traced profile's plan (strategy
    none; uniform, every block, traced as transformers' checkpointing runs
    the model) predicts the peak within 3% (the fidelity target,
    docs/fidelity.md);
  - MPNet in a SentenceTransformer (mean pooling, an in-batch contrastive
    loss; the module traced): the traced profile equals remat.profile's,
    metered on the real module, layer by layer (the first layer's input
    aside: remat.profile counts only tensors given directly); trained for
    one AdamW step without checkpoints and with remat.apply checkpointing
    every block, metered, within 3% of the traced plan's peak;
  - a small Llama trained by transformers in pure bf16 (its loss on the
    logits cast to fp32), metered, against the analytic plan of its
    config.json (the planner's hand-written model, not a trace);
  - a config with "dtype": null traces as one without a dtype;
  - a Llama config's parameter count is transformers' own on the meta
    device, its identical blocks traced once;
  - python -m remat trace writes a profile the planner plans, and refuses
    a model_type transformers does not know with one line (exit 2).

Run by CTest (label "python") with PYTHONPATH=build/python plus python/;
skipped, visibly, where torch, transformers, sentence-transformers or the
meter is missing (tests/python/needs.py). Models are tiny, fp32 on CPU
(the Llama above bf16), dropout off. The meter is loaded before torch
allocates anything.
"""
import gc
import json
import os
import subprocess
import sys
import tempfile
import unittest

import needs
import remat

from traced_steps import (adamw_step_peak, metered_peak, remat_measure, torch,  # the meter first
                          transformers)

PEAK_TOLERANCE = 0.03
# The traced MPNet profile against remat.profile's, metered on the real
# module: the figures agree within 1 KiB (seen: 512 B in a block's backward
# workspace and 8 B in a hidden state's storage; a kernel's allocations that
# it frees before returning are no op's output, and the fake meter does not
# see them).
PROFILE_TOLERANCE_BYTES = 1024
FIGURES = ("input_bytes", "activation_bytes", "forward_workspace_bytes",
           "forward_nograd_workspace_bytes", "backward_workspace_bytes", "gradient_bytes")
MICRO_BATCH, SEQ_LEN = 2, 64
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             vocab_size=128, max_position_embeddings=128)
MODERNBERT = dict(SMALL, model_type="modernbert", architectures=["ModernBertForMaskedLM"], pad_token_id=0, bos_token_id=1, eos_token_id=2,
                  cls_token_id=1, sep_token_id=2, embedding_dropout=0.0, mlp_dropout=0.0,
                  attention_dropout=0.0, global_attn_every_n_layers=2, local_attention=32)
MPNET = dict(SMALL, model_type="mpnet", hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)


class _Model:
    """A real model and its training step, and the same traced."""

    checkpointing = False

    def step(self, model, batch):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def run():
            self.loss(model, batch).backward()
            opt.step()
            opt.zero_grad()
        return run


class ModernBert(_Model):
    config = MODERNBERT

    def build(self):
        cfg = transformers.AutoConfig.for_model(**self.config)
        return transformers.AutoModelForMaskedLM.from_config(cfg).train()

    def batch(self):
        ids = torch.randint(3, self.config["vocab_size"], (MICRO_BATCH, SEQ_LEN))
        return {"input_ids": ids, "labels": ids}

    def loss(self, model, batch):
        return model(**batch).loss

    def trace(self, model, batch, checkpointing=False):
        # With checkpointing: as transformers' checkpointing runs the model.
        return remat.trace(self.config, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu",
                           gradient_checkpointing=checkpointing)

    def checkpoint(self, model, plan):
        model.gradient_checkpointing_enable()


class SentenceMpnet(_Model):
    """MPNetModel as a SentenceTransformer module (what models.Transformer
    does without a tokenizer), mean pooling, and an in-batch contrastive
    loss over the sentence embeddings (cross-entropy of scaled cosine
    similarities, each text its own positive)."""
    config = MPNET

    def build(self):
        from sentence_transformers import SentenceTransformer, models

        from remat._trace_sentence import Encoder as AutoModule  # models.Transformer, no tokenizer

        cfg = transformers.AutoConfig.for_model(**self.config)
        auto = transformers.MPNetModel(cfg, add_pooling_layer=False)
        pooling = models.Pooling(cfg.hidden_size, "mean")
        return SentenceTransformer(modules=[AutoModule(auto), pooling], device="cpu").train()

    def batch(self):
        shape = (MICRO_BATCH * 4, SEQ_LEN)
        mask = torch.ones(shape, dtype=torch.long)
        mask[::2, SEQ_LEN // 2:] = 0  # every other text padded to half the length
        return {"input_ids": torch.randint(3, self.config["vocab_size"], shape),
                "attention_mask": mask}

    @staticmethod
    def loss_of(output, batch):
        e = torch.nn.functional.normalize(output["sentence_embedding"], dim=-1)
        scores = 20 * e @ e.t()
        return torch.nn.functional.cross_entropy(scores, torch.arange(len(e)))

    def loss(self, model, batch):
        return self.loss_of(model(dict(batch)), batch)

    def trace(self, model, batch, checkpointing=False):
        # checkpointing: remat.apply's, which runs the module as it is.
        return remat.trace(model, (dict(batch),), loss_fn=lambda out, inputs: self.loss_of(out, batch),
                           device="cpu")

    def checkpoint(self, model, plan):
        remat.apply(model, plan)  # MPNetModel has no checkpointing of its own


@needs.modules("torch", "transformers")
@needs.meter_library()
class TracedStepTest(unittest.TestCase):
    def check(self, kind):
        for checkpointing in (False, True):
            with self.subTest(model=type(kind).__name__, checkpointing=checkpointing):
                gc.collect()
                start = remat_measure.load().current_bytes()
                torch.manual_seed(0)
                model = kind.build()
                batch = kind.batch()
                profile = kind.trace(model, batch, checkpointing)
                plan = remat.plan(profile, budget="1TB", strategy="uniform" if checkpointing
                                  else "none", **({"every": 1} if checkpointing else {}))
                if checkpointing:
                    kind.checkpoint(model, plan)
                gc.collect()
                measured = metered_peak(kind.step(model, batch), start)
                predicted = plan.predicted_peak_bytes
                error = (measured - predicted) / predicted
                print(f"{type(kind).__name__} checkpointing={checkpointing}: predicted "
                      f"{predicted:,} B, measured {measured:,} B ({error:+.2%})")
                self.assertLessEqual(abs(error), PEAK_TOLERANCE)
                del model, batch, profile

    def test_modernbert_from_its_config(self):
        self.check(ModernBert())

    def test_sentence_transformers_mpnet_trained(self):
        # MPNet's relative position bias (micro_batch x heads x seq^2
        # floats, from a parameter) is made before the first block and
        # handed to every block: its gradient is summed over the blocks'
        # backwards, created by the last block's, whose backward workspace
        # is traced with the bias needing it (without: the step without
        # checkpoints 554,068 B, 4.7%, below the plan). A block
        # checkpointed by remat.apply keeps the bias for its recompute, as
        # the profile has the prefix keep it.
        needs.skip_without(self, "sentence_transformers")
        self.check(SentenceMpnet())

    def test_llama_blocks_as_metered_and_hand_written(self):
        # A small Llama from its config (no cache, no attention mask: a
        # training batch): the traced blocks' figures are remat.profile's,
        # metered on the real model, and the activation, forward workspace
        # and gradients are the hand-written model's. (On fake tensors
        # transformers cannot see that the default positions hold no packed
        # sequences and would build a full mask; _trace_build's
        # unpacked_positions answers as a real step does.)
        config = dict(TraceConfigTest.LLAMA, architectures=["LlamaForCausalLM"],
                      num_hidden_layers=4, intermediate_size=128, tie_word_embeddings=False)
        traced = remat.trace(config, micro_batch=2, seq_len=32, device="cpu")
        cfg = transformers.AutoConfig.for_model(**config)
        cfg.use_cache = False
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).train()
        ids = torch.randint(0, config["vocab_size"], (2, 32))
        metered = remat.profile(model, {"input_ids": ids, "labels": ids}, repeats=1)
        with tempfile.TemporaryDirectory() as d:
            path, out = os.path.join(d, "config.json"), os.path.join(d, "analytic.json")
            with open(path, "w") as f:
                json.dump(config, f)
            code, _, err = remat._core.run(["profile", "--analytic", path, "--micro-batch", "2",
                                            "--seq-len", "32", "--device", "cpu", "-o", out])
            self.assertEqual(code, 0, err)
            with open(out) as f:
                analytic = json.load(f)
        blocks = [l for l in analytic["layers"] if l["kind"] == "block"]
        self.assertEqual(len(blocks), 4)
        for t, m, a in zip(traced.layers[1:5], metered.layers[1:5], blocks):
            for key in FIGURES:
                with self.subTest(layer=t["name"], figure=key):
                    self.assertLessEqual(abs(t[key] - m[key]), PROFILE_TOLERANCE_BYTES)
            for key in ("activation_bytes", "forward_workspace_bytes", "gradient_bytes"):
                with self.subTest(layer=t["name"], figure=key, against="hand-written"):
                    self.assertEqual(t[key], a[key])

    def test_llama_pure_bf16_analytic_plan(self):
        # transformers' LlamaForCausalLM in pure bf16 (the model and AdamW
        # in bf16, no autocast), 4 x 128 tokens, its loss on logits.float():
        # the analytic plan (the planner on the config.json) is below the
        # metered step by at most the fidelity target (a plan taking the
        # loss in 16 bits is 5.55% below: the fp32 copy, log-probabilities
        # and gradients), and above it by at most the target plus one
        # 16-bit hidden state per block and for the final norm: transformers'
        # RMSNorm saves its fp32 copy of a 16-bit input, so the step lets the
        # input go, which the hand-written model keeps until the layer's
        # backward (docs/fidelity.md, "Pure 16-bit training").
        config = dict(TraceConfigTest.LLAMA, architectures=["LlamaForCausalLM"],
                      num_hidden_layers=4, tie_word_embeddings=False, dtype="bfloat16")
        micro_batch, seq_len = 4, 128
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump(config, f)
            predicted = remat.plan(path, budget="1TB", strategy="none", attention="sdpa",
                                   micro_batch=micro_batch, seq_len=seq_len, device="cpu",
                                   precision="bf16").predicted_peak_bytes
        gc.collect()
        start = remat_measure.load().current_bytes()
        torch.manual_seed(0)
        cfg = transformers.AutoConfig.for_model(**config)
        cfg.use_cache = False
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).train()
        ids = torch.randint(0, config["vocab_size"], (micro_batch, seq_len))
        measured = adamw_step_peak(model, {"input_ids": ids, "labels": ids}, start)
        error = (measured - predicted) / predicted
        norm_inputs = 2 * micro_batch * seq_len * config["hidden_size"] * (
            config["num_hidden_layers"] + 1)
        print(f"Llama pure bf16: analytic {predicted:,} B, measured {measured:,} B "
              f"({error:+.2%})")
        self.assertLessEqual(error, PEAK_TOLERANCE)
        self.assertLessEqual(-error, PEAK_TOLERANCE + norm_inputs / predicted)

    def test_sentence_transformers_mpnet_as_remat_profile_meters_it(self):
        needs.skip_without(self, "sentence_transformers")
        kind = SentenceMpnet()
        torch.manual_seed(0)
        model, batch = kind.build(), kind.batch()
        traced = kind.trace(model, batch)
        measured = remat.profile(model, (dict(batch),),
                                 loss_fn=lambda out, inputs: kind.loss_of(out, batch), repeats=1)
        self.assertEqual([l["name"] for l in traced.layers], [l["name"] for l in measured.layers])
        self.assertEqual(traced.json["static"], measured.json["static"])
        for t, m in zip(traced.layers[1:], measured.layers[1:]):
            for key in FIGURES:
                with self.subTest(layer=t["name"], figure=key):
                    self.assertLessEqual(abs(t[key] - m[key]), PROFILE_TOLERANCE_BYTES,
                                         f"traced {t[key]}, metered {m[key]}")


@needs.modules("torch", "transformers")
class TraceConfigTest(unittest.TestCase):
    LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=160, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                 max_position_embeddings=256, tie_word_embeddings=True)

    def test_parameters_and_identical_blocks(self):
        # Six identical blocks are traced once: embedding, block0, head.
        p = remat.trace(self.LLAMA, micro_batch=2, seq_len=32)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(
                transformers.AutoConfig.for_model(**self.LLAMA))
        self.assertEqual(p.json["parameters"], sum(t.numel() for t in model.parameters()))
        self.assertEqual(p.json["trace"]["traced_layers"], 3)
        self.assertEqual([l["traced_as"] for l in p.layers[1:-1]], ["block0"] * 6)
        self.assertEqual(p.json["source"], "traced")
        # Each gradient created once (the tied embedding's by the head).
        self.assertEqual(sum(l["gradient_bytes"] for l in p.layers), 4 * p.json["parameters"])
        hidden = 2 * 32 * 64 * 4
        self.assertEqual([l["input_bytes"] for l in p.layers[1:]], [hidden] * 7)

    # A small DeepSeek-V3: multi-head latent attention, a dense first block,
    # then mixture-of-experts blocks with a shared expert (bf16: the experts'
    # grouped matmul takes bf16 only).
    DEEPSEEK_V3 = dict(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                       hidden_size=64, intermediate_size=128,
                       moe_intermediate_size=32, num_hidden_layers=4, first_k_dense_replace=1,
                       num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                       num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
                       q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                       v_head_dim=8, vocab_size=128, max_position_embeddings=128,
                       tie_word_embeddings=False)

    def test_deepseek_v3_parameters_and_block_classes(self):
        p = remat.trace(self.DEEPSEEK_V3, micro_batch=2, seq_len=16, precision="bf16")
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(
                transformers.AutoConfig.for_model(**self.DEEPSEEK_V3))
        self.assertEqual(p.json["parameters"], sum(t.numel() for t in model.parameters()))
        # The dense block and the first mixture-of-experts block, traced apart.
        self.assertEqual([l["traced_as"] for l in p.layers[1:-1]],
                         ["block0", "block1", "block1", "block1"])

    def test_shared_traces_are_each_blocks_own(self):
        # Blocks whose class, tensors, settings and call match share a
        # trace; traced one by one, each block's figures are the same. The
        # small ModernBERT alternates global and local attention (one class
        # of settings each), its first block has no attention norm.
        from unittest import mock

        from remat import _trace_chain

        for config in (MODERNBERT, self.DEEPSEEK_V3):
            with self.subTest(model_type=config["model_type"]):
                precision = "bf16" if config is self.DEEPSEEK_V3 else "fp32"
                shared = remat.trace(config, micro_batch=2, seq_len=32, precision=precision)
                with mock.patch.object(_trace_chain, "SHARE_BLOCKS", False):
                    alone = remat.trace(config, micro_batch=2, seq_len=32, precision=precision)
                self.assertEqual(alone.json["trace"]["traced_layers"], len(alone.layers))
                self.assertLess(shared.json["trace"]["traced_layers"], len(shared.layers))
                # saved_bytes aside: the planner does not read it, and a
                # mixture-of-experts block's varies from one trace of it
                # to the next (seen: 258,576 to 268,304 B in three traces).
                for a, b in zip(shared.layers, alone.layers):
                    a = {k: v for k, v in a.items() if k not in ("traced_as", "saved_bytes")}
                    b = {k: v for k, v in b.items() if k not in ("traced_as", "saved_bytes")}
                    self.assertEqual(a, b)
                if config is MODERNBERT:
                    self.assertEqual([l["traced_as"] for l in shared.layers[1:-1]],
                                     ["block0", "block1", "block2", "block1"])

    def test_optimizer_step_by_shape_is_the_whole_step(self):
        # One parameter of each shape stepped, counted once for each like
        # it: the workspace and time of AdamW stepping them all.
        from torch._subclasses.fake_tensor import FakeTensorMode

        from remat._trace import _optimizer_step
        from remat._trace_meter import FakeMeter
        from remat._trace_roofline import Roofline

        roofline, meter = Roofline("cpu"), FakeMeter()
        with FakeTensorMode(), meter:
            params = [torch.empty(s).requires_grad_(True)
                      for s in ((64, 64), (128, 64), (64, 64), (64,), (128, 64), (64,))]
            ms, workspace = _optimizer_step(params, meter, roofline)
            for p in params:
                p.grad = torch.empty_like(p)
            opt = torch.optim.AdamW(params, lr=1e-4, foreach=False)
            opt.step()
            before = meter.current_bytes()
            meter.reset_peak()
            costs = meter.costs = []
            opt.step()
            meter.costs = None
        self.assertEqual(workspace, meter.peak_bytes() - before)
        self.assertAlmostEqual(ms, roofline.ms(costs), delta=1e-9 * ms)

    def test_times_from_the_planners_device_presets(self):
        # Any preset `planner --device` takes (h100 among them), with the
        # planner's numbers; an unknown name is refused with its list.
        from remat._trace_roofline import Roofline

        r = Roofline("h100")
        self.assertEqual(r.bytes_per_ms, 3350e9 * 0.5 / 1e3)
        self.assertEqual(r.flops16_per_ms, 989.4e12 * 0.5 / 1e3)
        with self.assertRaises(remat.InputError) as e:
            Roofline("no-such-card")
        self.assertIn("expected h200, h100", str(e.exception))
        self.assertEqual(e.exception.exit_code, 2)
        p = remat.trace(self.LLAMA, micro_batch=1, seq_len=16, device="h100")
        self.assertEqual(p.json["device"], "h100")

    def test_the_class_the_planner_reads_a_config_as(self):
        # A config.json without "architectures" is the base model to the
        # planner's hand-written model (planner/src/input/hf_config.cc), one
        # naming LlamaForCausalLM the causal LM: the tracer builds the same
        # class, and both count transformers' parameters (an untied Llama:
        # the base model has no lm_head).
        untied = dict(self.LLAMA, num_hidden_layers=4, intermediate_size=128,
                      tie_word_embeddings=False)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            for architectures, cls in ((None, "LlamaModel"),
                                       (["LlamaForCausalLM"], "LlamaForCausalLM")):
                with self.subTest(architectures=architectures):
                    config = dict(untied, **({"architectures": architectures}
                                             if architectures else {}))
                    with open(path, "w") as f:
                        json.dump(config, f)
                    traced = remat.trace(config, micro_batch=2, seq_len=32)
                    planned = remat.plan(path, budget="1GB", micro_batch=2, seq_len=32)
                    with torch.device("meta"):
                        model = getattr(transformers, cls)(
                            transformers.AutoConfig.for_model(**untied))
                    self.assertEqual(traced.json["trace"]["model_class"], cls)
                    self.assertEqual(traced.json["parameters"],
                                     sum(t.numel() for t in model.parameters()))
                    self.assertEqual(planned.json["model"]["parameters"],
                                     traced.json["parameters"])

    def test_null_dtype_is_no_dtype(self):
        with_null = remat.trace(dict(self.LLAMA, dtype=None), micro_batch=1, seq_len=16)
        without = remat.trace(self.LLAMA, micro_batch=1, seq_len=16)
        self.assertEqual(with_null.layers, without.layers)

    def test_command(self):
        with tempfile.TemporaryDirectory() as d:
            config, out = os.path.join(d, "config.json"), os.path.join(d, "profile.json")
            with open(config, "w") as f:
                json.dump(dict(self.LLAMA, dtype=None), f)
            r = subprocess.run([sys.executable, "-m", "remat", "trace", config, "-o", out,
                                "--seq-len", "16"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            plan = remat.plan(out, budget="1GB")
            self.assertTrue(plan.fits)
            with open(config, "w") as f:
                json.dump({"model_type": "no-such-family"}, f)
            r = subprocess.run([sys.executable, "-m", "remat", "trace", config, "-o", out],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn('model_type "no-such-family"', r.stderr)

    def test_planner_traces_a_model_type_it_has_no_model_for(self):
        # planner/cli/traced_input.cc runs $REMAT_PYTHON -m remat trace and
        # caches the profile by the config and the job flags.
        saved = {k: os.environ.get(k) for k in ("REMAT_PYTHON", "REMAT_TRACE_CACHE")}
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "config.json")
            with open(config, "w") as f:
                json.dump(MPNET, f)
            os.environ["REMAT_PYTHON"] = sys.executable
            os.environ["REMAT_TRACE_CACHE"] = os.path.join(d, "cache")
            try:
                plan = remat.plan(config, budget="1GB", micro_batch=2, seq_len=32)
                again = remat.plan(config, budget="1GB", micro_batch=2, seq_len=32)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            self.assertTrue(plan.fits)
            self.assertEqual(plan.predicted_peak_bytes, again.predicted_peak_bytes)
            cached = os.listdir(os.path.join(d, "cache"))
            self.assertEqual(len(cached), 1)
            with open(os.path.join(d, "cache", cached[0])) as f:
                traced = json.load(f)
            self.assertEqual(traced["source"], "traced")
            self.assertEqual(traced["micro_batch"], 2)
            self.assertEqual(traced["seq_len"], 32)


if __name__ == "__main__":
    unittest.main()
