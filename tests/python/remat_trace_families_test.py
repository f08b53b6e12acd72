"""remat.trace on families the planner has no hand-written model for,
each from its config.json as transformers builds it, against real
training steps metered by remat's CPU meter:

  - ViT fine-tuned as an image classifier (ViTForImageClassification: the
    patch embedding and class token, pre-norm blocks, the classifier on
    the class token, cross-entropy over the labels);
  - XLM-RoBERTa fine-tuned as a sequence classifier
    (XLMRobertaForSequenceClassification: post-norm blocks, the
    classification head on the first token);
  - gpt-oss (GptOssForCausalLM: sliding-window and full attention layers
    alternating, attention sinks, a mixture of experts in every block);
  - DeepSeek-V3 (DeepseekV3ForCausalLM: multi-head latent attention, a
    dense first block, then mixture-of-experts blocks with a shared
    expert).
A small ModernBERT (global and local attention layers alternating) has
its two-block segments applied too (its steps: remat_trace_test), and the
same ModernBERT in a SentenceTransformer trained with sentence-transformers'
MNRL on triplets, its job traced from the config, without checkpoints and
with two-block segments in both passes.
The two mixtures of experts run in bf16: their experts' grouped matmul
takes bf16 only under fake tensors.

For each, trained for one AdamW step by transformers without and with its
gradient checkpointing (every block), metered: the traced plan with
nothing checkpointed (--strategy none) and with every block checkpointed
(--strategy uniform --every 1, the config traced as transformers'
checkpointing runs it) predicts the step's peak within 3% (the fidelity
target, docs/fidelity.md). The bf16 blocks' RMSNorms save an fp32 copy
of their input, not the input: the traced layers say so ("keeps_input":
false) and the plans free each input after its block's forward, as the
step does. Then remat.apply of a plan of two-block segments
(--strategy uniform --every 2; gpt-oss: blocks 0 and 2 each alone) at a budget halfway from its
predicted peak to that of checkpointing nothing: the metered step within
3% of the prediction and under the budget, and the gradients equal to the
eager model's (dropout off: a recompute runs the same ops on the same
inputs in the same order; fp32 to 1e-6 of each gradient's largest
element, bf16 to 1e-2, each far above its rounding (2^-24, 2^-8 of an
element) and far below any real difference).

Run by CTest (label "python") with PYTHONPATH=build/python plus python/;
skipped, visibly, where torch, transformers or the meter is missing
(tests/python/needs.py). Models are tiny, on CPU. The meter is loaded
before torch allocates anything.
"""
import gc
import unittest

import needs
import remat

from traced_steps import adamw_step_peak, metered_peak, remat_measure, torch, transformers  # the meter first

PEAK_TOLERANCE = 0.03
GRADIENT_TOLERANCE = {"fp32": 1e-6, "bf16": 1e-2}
MICRO_BATCH, SEQ_LEN = 4, 128
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             vocab_size=128, max_position_embeddings=128)

VIT = dict(SMALL, model_type="vit", architectures=["ViTForImageClassification"],
           image_size=64, patch_size=8, num_labels=10, hidden_dropout_prob=0.0,
           attention_probs_dropout_prob=0.0)
XLM_ROBERTA = dict(SMALL, model_type="xlm-roberta",
                   architectures=["XLMRobertaForSequenceClassification"], num_labels=3,
                   pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1,
                   max_position_embeddings=SEQ_LEN + 2, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0)
GPT_OSS = dict(SMALL, model_type="gpt_oss", architectures=["GptOssForCausalLM"],
               intermediate_size=64, num_key_value_heads=2, head_dim=16, num_local_experts=4,
               num_experts_per_tok=2, sliding_window=32,
               layer_types=["sliding_attention", "full_attention"] * 2, attention_dropout=0.0,
               rope_parameters=dict(rope_type="default", rope_theta=150000.0),
               tie_word_embeddings=False)
DEEPSEEK_V3 = dict(SMALL, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                   moe_intermediate_size=32, first_k_dense_replace=1, num_key_value_heads=4,
                   n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, n_group=1,
                   topk_group=1, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8,
                   qk_rope_head_dim=8, v_head_dim=8, tie_word_embeddings=False)
# ModernBERT (its global and local attention layers alternating, the first
# block without an attention norm): its steps against the traced plans are
# remat_trace_test's; here remat.apply's two-block segments.
MODERNBERT = dict(SMALL, model_type="modernbert", architectures=["ModernBertForMaskedLM"],
                  pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
                  embedding_dropout=0.0, mlp_dropout=0.0, attention_dropout=0.0,
                  global_attn_every_n_layers=2, local_attention=32)
FAMILIES = {"vit": (VIT, "fp32"), "xlm-roberta": (XLM_ROBERTA, "fp32"),
            "gpt_oss": (GPT_OSS, "bf16"), "deepseek_v3": (DEEPSEEK_V3, "bf16"),
            "modernbert": (MODERNBERT, "fp32")}
_profiles = {}


def profile(family, checkpointing=False):
    """The family's config traced (checkpointing: as transformers'
    checkpointing runs it), once."""
    if (family, checkpointing) not in _profiles:
        config, precision = FAMILIES[family]
        _profiles[family, checkpointing] = remat.trace(
            config, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu", precision=precision,
            gradient_checkpointing=checkpointing)
    return _profiles[family, checkpointing]


def build(family):
    config, precision = FAMILIES[family]
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config)
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = False  # training: no KV cache
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    return getattr(transformers, config["architectures"][0])(cfg).to(dtype).train()


def batch_of(family):
    config, _ = FAMILIES[family]
    generator = torch.Generator().manual_seed(1)
    if family == "vit":
        size = config["image_size"]
        return {"pixel_values": torch.randn(MICRO_BATCH, 3, size, size, generator=generator),
                "labels": torch.randint(0, config["num_labels"], (MICRO_BATCH,),
                                        generator=generator)}
    ids = torch.randint(3, config["vocab_size"], (MICRO_BATCH, SEQ_LEN), generator=generator)
    if "num_labels" in config:
        return {"input_ids": ids, "labels": torch.randint(0, config["num_labels"], (MICRO_BATCH,),
                                                          generator=generator)}
    return {"input_ids": ids, "labels": ids}


def trained_peak(family, prepare):
    """The metered peak of one AdamW step of a fresh model after
    prepare(model) (transformers' checkpointing or remat.apply)."""
    gc.collect()
    start = remat_measure.load().current_bytes()
    model = build(family)
    prepare(model)
    return adamw_step_peak(model, batch_of(family), start)


def applied_plan(family):
    """(plan, budget): two-block segments at a budget halfway from their
    predicted peak to that of checkpointing nothing. gpt-oss's blocks
    alternate sliding-window and full attention, each given its own mask:
    remat.apply runs each block of such a segment in its own call, under
    one checkpoint."""
    segments = dict(strategy="uniform", every=2)
    low = remat.plan(profile(family), budget="1TB", **segments).predicted_peak_bytes
    high = remat.plan(profile(family), budget="1TB", strategy="none").predicted_peak_bytes
    budget = (low + high) // 2
    assert low < high, f"{family}: two-block segments peak at {low:,} B, not below {high:,} B"
    return remat.plan(profile(family), budget=budget, **segments), budget


def report(what, predicted, measured):
    print(f"{what}: predicted {predicted:,} B, measured {measured:,} B "
          f"({(measured - predicted) / predicted:+.2%})")


@needs.modules("torch", "transformers")
@needs.meter_library()
class TracedFamilyStepTest(unittest.TestCase):
    def check_family(self, family, steps=(False, True)):
        for checkpointing in steps:
            with self.subTest(family=family, checkpointing=checkpointing):
                plan = remat.plan(profile(family, checkpointing), budget="1TB",
                                  **(dict(strategy="uniform", every=1) if checkpointing
                                     else dict(strategy="none")))

                def prepare(model):
                    if checkpointing:
                        model.gradient_checkpointing_enable()
                measured = trained_peak(family, prepare)
                predicted = plan.predicted_peak_bytes
                report(f"{family} checkpointing={checkpointing}", predicted, measured)
                self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)
        with self.subTest(family=family, applied="uniform every 2"):
            plan, budget = applied_plan(family)
            decisions = [l["decision"] for l in plan.layers if l["kind"] == "block"]
            self.assertEqual(decisions, ["checkpoint", "recompute"] * 2)
            measured = trained_peak(family, lambda model: remat.apply(model, plan))
            predicted = plan.predicted_peak_bytes
            report(f"{family} remat.apply at {budget:,} B", predicted, measured)
            self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)
            self.assertLessEqual(predicted, budget)
            self.assertLessEqual(measured, budget)
        with self.subTest(family=family, gradients="remat.apply against eager"):
            self.check_gradients(family, plan)

    def check_gradients(self, family, plan):
        model, batch = build(family), batch_of(family)

        def gradients():
            model.zero_grad()
            model(**batch).loss.backward()
            return {n: p.grad.float().clone() for n, p in model.named_parameters()
                    if p.grad is not None}
        eager = gradients()
        remat.apply(model, plan)
        applied = gradients()
        remat.unapply(model)
        self.assertEqual(applied.keys(), eager.keys())
        tolerance = GRADIENT_TOLERANCE[FAMILIES[family][1]]
        for name, g in eager.items():
            scale = g.abs().max().item() or 1.0
            self.assertLessEqual((applied[name] - g).abs().max().item(), tolerance * scale, name)

    def test_blocks_of_two_kinds_recompute_with_their_own_masks_and_random_state(self):
        # gpt-oss with attention dropout, and a draw from the random state
        # before each block (as BART's and Whisper's layerdrop draws
        # torch.rand in training): remat.apply's two-block segments span a
        # sliding-window and a full-attention block, each recomputed with
        # its own mask and the random state it started with, so the
        # dropout masks and the gradients are the eager step's.
        plan, _ = applied_plan("gpt_oss")
        config = dict(GPT_OSS, attention_dropout=0.25)
        cfg = transformers.AutoConfig.for_model(**config)
        cfg.use_cache = False
        torch.manual_seed(0)
        model = transformers.GptOssForCausalLM(cfg).to(torch.bfloat16).train()
        def layerdrop(module, args):
            torch.rand([])  # drawn, not used (the hook returns None: the arguments stay)
        for block in model.model.layers:
            block.register_forward_pre_hook(layerdrop)
        batch = batch_of("gpt_oss")

        def gradients():
            model.zero_grad()
            torch.manual_seed(1)
            model(**batch).loss.backward()
            return {n: p.grad.float().clone() for n, p in model.named_parameters()
                    if p.grad is not None}
        def loss_without_grad():
            torch.manual_seed(1)
            with torch.no_grad():
                return model(**batch).loss.item()
        eager, eager_loss = gradients(), loss_without_grad()
        remat.apply(model, plan)
        applied, applied_loss = gradients(), loss_without_grad()
        remat.unapply(model)
        for name, g in eager.items():
            scale = g.abs().max().item() or 1.0
            self.assertLessEqual((applied[name] - g).abs().max().item(),
                                 GRADIENT_TOLERANCE["bf16"] * scale, name)
        self.assertEqual(applied_loss, eager_loss)  # each block its own mask without grad too

    def test_modernbert_applied(self):
        self.check_family("modernbert", steps=())

    def test_modernbert_sentence_transformers_mnrl(self):
        # ModernBERT (global and local attention alternating) as a
        # SentenceTransformer with mean pooling, trained with
        # sentence-transformers' MultipleNegativesRankingLoss on triplets:
        # the job traced from the config (remat.trace(job=...): the anchors'
        # pass, then the other two columns merged into a second), against
        # the metered step without checkpoints and with remat.apply's
        # two-block segments in both passes (each block in its own call).
        needs.skip_without(self, "sentence_transformers")
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        from sentence_transformers.sentence_transformer.modules import Pooling

        from remat._trace_sentence import Encoder

        config = dict(MODERNBERT, architectures=["ModernBertModel"])
        job = dict(head="pooling", pooling="mean", loss="mnrl", texts_per_example=3)
        profile = remat.trace(config, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu",
                              job=job)
        generator = torch.Generator().manual_seed(1)
        shape = (MICRO_BATCH, SEQ_LEN)
        features = [{"input_ids": torch.randint(3, config["vocab_size"], shape,
                                                generator=generator),
                     "attention_mask": torch.ones(shape, dtype=torch.long)} for _ in range(3)]
        segments = dict(strategy="uniform", every=2)
        low = remat.plan(profile, budget="1TB", **segments).predicted_peak_bytes
        high = remat.plan(profile, budget="1TB", strategy="none").predicted_peak_bytes
        self.assertLess(low, high)
        for name, plan, budget in (
                ("none", remat.plan(profile, budget="1TB", strategy="none"), None),
                ("uniform every 2", remat.plan(profile, budget=(low + high) // 2, **segments),
                 (low + high) // 2)):
            with self.subTest(plan=name):
                gc.collect()
                start = remat_measure.load().current_bytes()
                cfg = transformers.AutoConfig.for_model(**config)
                torch.manual_seed(0)
                model = SentenceTransformer(modules=[Encoder(transformers.ModernBertModel(cfg)),
                                                     Pooling(cfg.hidden_size, "mean")],
                                            device="cpu").train()
                if budget is not None:
                    remat.apply(model, plan)
                loss = MultipleNegativesRankingLoss(model)
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

                def step():
                    loss([dict(f) for f in features], None).backward()
                    opt.step()
                    opt.zero_grad()
                gc.collect()
                measured = metered_peak(step, start)
                predicted = plan.predicted_peak_bytes
                report(f"modernbert mnrl {name}", predicted, measured)
                self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)
                if budget is not None:
                    self.assertLessEqual(measured, budget)
                    # The applied plan's gradients against the same model's
                    # eager ones.
                    applied = self.mnrl_gradients(model, loss, features)
                    remat.unapply(model)
                    eager = self.mnrl_gradients(model, loss, features)
                    for n, g in eager.items():
                        scale = g.abs().max().item() or 1.0
                        self.assertLessEqual((applied[n] - g).abs().max().item(),
                                             GRADIENT_TOLERANCE["fp32"] * scale, n)
                del model, loss, opt

    @staticmethod
    def mnrl_gradients(model, loss, features):
        model.zero_grad()
        loss([dict(f) for f in features], None).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    def test_vit_image_classification(self):
        self.check_family("vit")

    def test_xlm_roberta_sequence_classification(self):
        self.check_family("xlm-roberta")

    def test_gpt_oss(self):
        self.check_family("gpt_oss")

    def test_deepseek_v3(self):
        self.check_family("deepseek_v3")


if __name__ == "__main__":
    unittest.main()
