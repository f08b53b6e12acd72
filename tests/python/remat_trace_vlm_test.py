"""A vision-language model traced as a graph profile (docs/graphs.md: the
vision tower's chain, the language model's, the image features spliced
into the language model's sequence by its embedding), planned by the
planner's graph plan and carried out by remat.apply, against real training
steps metered by remat's CPU meter.

  - a small LLaVA from its config.json (LlavaForConditionalGeneration: a
    CLIP vision tower of 3 blocks, a Llama of 3 blocks), one 32 x 32 image
    (16 image tokens) in each sequence of 64 tokens, the loss on the text
    tokens; trained for one AdamW step by transformers without and with
    its gradient checkpointing (every block of both chains), metered: the
    graph plan with nothing checkpointed (--strategy none) and with every
    block of both chains (--strategy uniform --every 1, of the config
    traced as transformers' checkpointing runs it) predicts the step's
    peak within 3% (the fidelity target, docs/fidelity.md);
  - the graph's shape: two chains, one edge from the vision chain into
    the language chain's embedding (layer 0), its bytes the projected
    image features; the parameters of both chains add up to transformers'
    count on the meta device;
  - remat.apply of a plan checkpointing some blocks of both chains and not
    others: the metered step within 3% of the plan's prediction and under
    its budget, the gradients equal to the eager model's (fp32, dropout
    off: a recompute runs the same ops on the same inputs in the same
    order, so they agree to rounding; 1e-6 relative, far above fp32's
    6e-8 and far below any real difference);
  - LLaVA-1.5's features, taken before the vision tower's last block
    (vision_feature_layer -2): the vision chain has the blocks before it,
    the last runs in its last layer; the same steps within 3%; so too a
    small Gemma 3 (Gemma3ForConditionalGeneration, a SigLIP tower) and a
    small Mistral 3 (Mistral3ForConditionalGeneration, a Pixtral tower
    whose step takes image_sizes, each image's size; remat.apply as
    above, its gradients the eager model's), and a small Qwen2.5-VL and
    Qwen2-VL (their vision part `visual`, their step given the packed
    patches, image_grid_thw and mm_token_type_ids; Qwen2.5-VL's
    remat.apply as above); a Qwen3-VL, whose vision tower hands its
    language model deepstack features besides the image features, and a
    Gemma 3 config pooling more image tokens than its tower has patches
    are refused in one line each;
  - planner --budget 1GB config.json traces the config (python -m remat
    trace) and plans the graph; features joined from several vision
    layers are refused in one line, and Llama 4's text model
    (Llama4ForCausalLM) stays a chain;
  - two towers meeting in the contrastive loss (a small CLIPModel and
    SiglipModel, 4 image-text pairs, return_loss): a graph of a vision
    chain and a text chain, the pooled image features read by the text
    chain's last layer (the loss); trained by transformers without and
    with its gradient checkpointing, and with remat.apply of two-block
    segments in both towers, metered: within 3% of the plan's prediction,
    the applied plan under its budget and its gradients equal to eager's.

Run by CTest (label "python") with PYTHONPATH=build/python plus python/;
skipped, visibly, where torch, transformers or the meter is missing
(tests/python/needs.py). Models are tiny, fp32 on CPU. The meter is
loaded before torch allocates anything.
"""
import gc
import json
import os
import sys
import tempfile
import unittest

import needs
import remat

from traced_steps import adamw_step_peak, remat_measure, torch, transformers  # the meter first

PEAK_TOLERANCE = 0.03
RELATIVE = 1e-6
MICRO_BATCH, SEQ_LEN = 2, 64
IMAGE_TOKEN = 250
# A CLIP vision tower (32 x 32 images of 8 x 8 patches: 16 patches and the
# class token, which the "default" strategy drops) and a Llama.
LLAVA = dict(model_type="llava", architectures=["LlavaForConditionalGeneration"],
             image_token_index=IMAGE_TOKEN, vision_feature_layer=-1,
             vision_feature_select_strategy="default", projector_hidden_act="gelu",
             text_config=dict(model_type="llama", vocab_size=256, hidden_size=64,
                              intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                              num_key_value_heads=4, max_position_embeddings=128),
             vision_config=dict(model_type="clip_vision_model", hidden_size=48,
                                intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                                image_size=32, patch_size=8, projection_dim=48))
# LLaVA-1.5 takes the image features before the vision tower's last block
# (the hidden states of -2), which runs without feeding them.
LLAVA_15 = dict(LLAVA, vision_feature_layer=-2)
IMAGE_TOKENS = (32 // 8) ** 2
# A Gemma 3 (a SigLIP vision tower of 8 x 8 patches pooled to 16 image
# tokens, a Gemma 3 text model with sliding-window attention); its real
# step gets token_type_ids (1 on the image's tokens), which transformers
# reads to let the image's tokens attend to each other.
GEMMA3 = dict(model_type="gemma3", architectures=["Gemma3ForConditionalGeneration"],
              mm_tokens_per_image=IMAGE_TOKENS, image_token_index=IMAGE_TOKEN,
              boi_token_index=251, eoi_token_index=252,
              text_config=dict(model_type="gemma3_text", vocab_size=256, hidden_size=64,
                               intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                               sliding_window=32),
              vision_config=dict(model_type="siglip_vision_model", hidden_size=48,
                                 intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                                 image_size=32, patch_size=4))
# A Mistral 3 (a Pixtral vision tower of 4 x 4 patches, its 8 x 8 patches
# merged 2 x 2 to 16 image tokens, a Mistral): its step gets image_sizes
# (each image's height and width, a tensor as transformers' processor
# passes it); the images pack into one sequence of the tower, their
# attention kept to each image (a block-diagonal mask).
MISTRAL3 = dict(model_type="mistral3", architectures=["Mistral3ForConditionalGeneration"],
                image_token_index=IMAGE_TOKEN, spatial_merge_size=2, vision_feature_layer=-1,
                text_config=dict(model_type="mistral", vocab_size=256, hidden_size=64,
                                 intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=16, max_position_embeddings=128),
                vision_config=dict(model_type="pixtral", hidden_size=48, intermediate_size=96,
                                   num_hidden_layers=3, num_attention_heads=4, image_size=32,
                                   patch_size=4))
# A Qwen2.5-VL (its vision part `visual`: 4 x 4 patches of 2 frames, in
# windows of 2 x 2 merged patches but for its last block, which attends to
# the whole image; 2 x 2 patches merged into each of 16 image tokens, a
# Qwen2 with M-RoPE). Its config gives no image size: 32 x 32 is the
# size the job says. Its step gets the images as its processor packs them
# (a row of 2 x 3 x 4 x 4 values per patch), image_grid_thw (each image's
# grid of patches) and mm_token_type_ids (1 on the image's tokens), from
# which the language model computes its positions.
QWEN2_5_VL = dict(model_type="qwen2_5_vl", architectures=["Qwen2_5_VLForConditionalGeneration"],
                  image_token_id=IMAGE_TOKEN, vision_start_token_id=251, vision_end_token_id=252,
                  video_token_id=253, bos_token_id=1, eos_token_id=2,
                  text_config=dict(model_type="qwen2_5_vl_text", vocab_size=256, hidden_size=64,
                                   intermediate_size=128, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=128, bos_token_id=1, eos_token_id=2,
                                   rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                        mrope_section=[2, 3, 3])),
                  vision_config=dict(model_type="qwen2_5_vl", depth=3, hidden_size=48,
                                     intermediate_size=96, num_heads=4, patch_size=4,
                                     spatial_merge_size=2, temporal_patch_size=2,
                                     out_hidden_size=64, window_size=16,
                                     fullatt_block_indexes=[2], image_size=32))
# A Qwen2-VL: the same step, its vision blocks all attending to each
# whole image (no windows).
QWEN2_VL = dict(QWEN2_5_VL, model_type="qwen2_vl", architectures=["Qwen2VLForConditionalGeneration"],
                text_config=dict(QWEN2_5_VL["text_config"], model_type="qwen2_vl_text"),
                vision_config=dict(model_type="qwen2_vl", depth=3, embed_dim=48, mlp_ratio=2,
                                   num_heads=4, hidden_size=64, patch_size=4,
                                   spatial_merge_size=2, temporal_patch_size=2, image_size=32))
_profiles = {}


def profile(config=LLAVA, checkpointing=False):
    """`config` traced (checkpointing: as transformers' checkpointing runs
    it, remat.trace(gradient_checkpointing=True)), once."""
    key = (config["model_type"], config.get("vision_feature_layer"), checkpointing)
    if key not in _profiles:
        _profiles[key] = remat.trace(config, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                                     device="cpu", gradient_checkpointing=checkpointing)
    return _profiles[key]


def build(config=LLAVA):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config)
    cfg.text_config.use_cache = False  # training: no KV cache
    return getattr(transformers, config["architectures"][0])(cfg).train()


def batch_of(config=LLAVA):
    """Each sequence: a token, the image's tokens, text; labels the text.
    Two towers': PAIRS image-text pairs (pairs_batch)."""
    if config in TOWERS:
        return pairs_batch()
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(4, IMAGE_TOKEN, (MICRO_BATCH, SEQ_LEN), generator=generator)
    ids[:, 1:1 + IMAGE_TOKENS] = IMAGE_TOKEN
    labels = ids.clone()
    labels[:, 1:1 + IMAGE_TOKENS] = -100
    pixels = torch.randn(MICRO_BATCH, 3, 32, 32, generator=generator)
    batch = {"input_ids": ids, "pixel_values": pixels, "labels": labels}
    if config is GEMMA3:
        batch["token_type_ids"] = (ids == IMAGE_TOKEN).long()
    if config is MISTRAL3:
        batch["image_sizes"] = torch.tensor([[32, 32]] * MICRO_BATCH)
    if config in (QWEN2_5_VL, QWEN2_VL):
        batch["pixel_values"] = torch.randn(MICRO_BATCH * 8 * 8, 2 * 3 * 4 * 4,
                                            generator=generator)
        batch["image_grid_thw"] = torch.tensor([[1, 8, 8]] * MICRO_BATCH)
        batch["mm_token_type_ids"] = (ids == IMAGE_TOKEN).int()
    return batch


def trained_peak(plan, prepare, config=LLAVA):
    """(predicted, measured) peak bytes: a fresh model, prepare(model)
    (transformers' checkpointing or remat.apply), one metered AdamW step."""
    gc.collect()
    start = remat_measure.load().current_bytes()
    model = prepare(build(config))
    return plan.predicted_peak_bytes, adamw_step_peak(model, batch_of(config), start)


def report(what, predicted, measured):
    print(f"{what}: predicted {predicted:,} B, measured {measured:,} B "
          f"({(measured - predicted) / predicted:+.2%})")


def checkpointed_blocks(plan):
    return {c["name"]: [n for n, d in zip(c["layer_names"], c["decisions"])
                        if n.startswith("block") and d != "keep"]
            for c in plan.json["chains"]}


@needs.modules("torch", "transformers")
@needs.meter_library()
class TracedVisionLanguageStepTest(unittest.TestCase):
    def test_transformers_step_against_the_plan(self):
        for config in (LLAVA, LLAVA_15, GEMMA3, MISTRAL3, QWEN2_5_VL, QWEN2_VL):
            for checkpointing in (False, True):
                with self.subTest(model=config["model_type"],
                                  layer=config.get("vision_feature_layer"),
                                  checkpointing=checkpointing):
                    self.check_step(config, checkpointing)

    def check_step(self, config, checkpointing):
        plan = remat.plan(profile(config, checkpointing), budget="1TB",
                          **(dict(strategy="uniform", every=1) if checkpointing
                             else dict(strategy="none")))
        self.assertIsInstance(plan, remat.GraphPlan)

        def prepare(model):
            if checkpointing:
                model.gradient_checkpointing_enable()
            return model
        predicted, measured = trained_peak(plan, prepare, config)
        layer = config.get("vision_feature_layer")
        report(f"{config['model_type']}" + (f" vision_feature_layer {layer}" if layer else "") +
               f" checkpointing={checkpointing}", predicted, measured)
        self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)

    def test_applied_plan_checkpointing_blocks_of_both_chains(self):
        for config in (LLAVA, MISTRAL3, QWEN2_5_VL):
            with self.subTest(model=config["model_type"]):
                plan, budget = APPLIED(config)
                blocks = checkpointed_blocks(plan)
                self.assertEqual(blocks["vision"], ["block0", "block1", "block2"])
                self.assertTrue(blocks["vision"] and blocks["language"], blocks)
                check_applied_peak(self, plan, budget, config)


def check_applied_peak(test, plan, budget, config):
    """remat.apply of `plan` on a fresh `config` model: its metered step
    within PEAK_TOLERANCE of the plan's prediction, both under `budget`."""
    predicted, measured = trained_peak(plan, lambda model: remat.apply(model, plan), config)
    report(f"{config['model_type']} applied {checkpointed_blocks(plan)}", predicted, measured)
    test.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)
    test.assertLessEqual(predicted, budget)
    test.assertLessEqual(measured, budget)


def check_applied_gradients(test, model, batch, plan, chains):
    """With `plan` applied (a checkpoint in each of `chains`' blocks), the
    gradients of a step on `batch` equal the eager model's; unapply
    leaves no block's forward set."""
    def gradients():
        model.zero_grad()
        model(**batch).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    eager = gradients()
    remat.apply(model, plan)
    test.assertTrue(all(any("forward" in b.__dict__ for b in chain) for chain in chains))
    applied = gradients()
    test.assertEqual(applied.keys(), eager.keys())
    for name, g in eager.items():
        scale = g.abs().max().item() or 1.0
        test.assertLessEqual((applied[name] - g).abs().max().item(), RELATIVE * scale, name)
    remat.unapply(model)
    test.assertFalse(any("forward" in b.__dict__ for chain in chains for b in chain))


def check_packed_images(test, config, vision):
    """`config`'s two images of 32 x 32 in 4 x 4 patches (one sequence of
    the tower, 48 wide) handed on as 16 tokens each (64 wide); the chains'
    parameters transformers' count; with APPLIED(config), the gradients
    the eager model's (vision(model): the module holding the vision
    blocks, as `layers` or `blocks`)."""
    chains = profile(config).chains
    layers = chains["vision"]["layers"]
    test.assertEqual(layers[-1]["output_bytes"], MICRO_BATCH * IMAGE_TOKENS * 64 * 4)
    test.assertEqual(layers[0]["output_bytes"], MICRO_BATCH * (32 // 4) ** 2 * 48 * 4)
    with torch.device("meta"):
        model = build(config)
    test.assertEqual(sum(c["parameters"] for c in chains.values()),
                     sum(p.numel() for p in model.parameters()))
    plan, _ = APPLIED(config)
    model = build(config)
    tower = vision(model)
    check_applied_gradients(test, model, batch_of(config), plan,
                            (getattr(tower, "layers", None) or tower.blocks,
                             model.model.language_model.layers))


def APPLIED(config=LLAVA):
    """(plan, budget) remat.apply carries out on `config`: in each chain,
    two-block segments (block0 checkpointed and block1 recomputed in its
    segment, block2 checkpointed; --strategy uniform --every 2), at a
    budget halfway from its predicted peak to that of checkpointing
    nothing, which does not fit there."""
    segments = dict(strategy="uniform", every=2)
    low = remat.plan(profile(config), budget="1TB", **segments).predicted_peak_bytes
    high = remat.plan(profile(config), budget="1TB", strategy="none").predicted_peak_bytes
    budget = (low + high) // 2
    return remat.plan(profile(config), budget=budget, **segments), budget


@needs.modules("torch", "transformers")
class VisionLanguageGraphTest(unittest.TestCase):
    def test_shape(self):
        chains = profile().chains
        self.assertEqual(list(chains), ["vision", "language"])
        self.assertEqual(profile().json["edges"],
                         [{"from": "vision", "to": "language", "readers": [0]}])
        features = MICRO_BATCH * IMAGE_TOKENS * 64 * 4  # projected to the Llama's width
        self.assertEqual(chains["vision"]["layers"][-1]["output_bytes"], features)
        self.assertEqual([l["kind"] for l in chains["vision"]["layers"]],
                         ["embedding", "block", "block", "block", "head"])
        with torch.device("meta"):
            model = transformers.LlavaForConditionalGeneration(
                transformers.AutoConfig.for_model(**LLAVA))
        self.assertEqual(sum(c["parameters"] for c in chains.values()),
                         sum(p.numel() for p in model.parameters()))

    def test_gradients_equal_the_eager_models(self):
        plan, _ = APPLIED()
        model = build()
        check_applied_gradients(self, model, batch_of(), plan,
                                (model.model.vision_tower.encoder.layers,
                                 model.model.language_model.layers))

    def test_images_given_their_sizes(self):
        # Mistral 3's step takes image_sizes: traced with a tensor of each
        # image's size, every image of the tower's size.
        check_packed_images(self, MISTRAL3, lambda model: model.model.vision_tower.transformer)

    def test_planner_plans_the_config_as_a_graph(self):
        # planner/cli/traced_input.cc runs $REMAT_PYTHON -m remat trace on
        # the config.json and plans the graph profile it writes.
        saved = {k: os.environ.get(k) for k in ("REMAT_PYTHON", "REMAT_TRACE_CACHE")}
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "config.json")
            with open(config, "w") as f:
                json.dump(dict(LLAVA, dtype=None), f)
            os.environ["REMAT_PYTHON"] = sys.executable
            os.environ["REMAT_TRACE_CACHE"] = os.path.join(d, "cache")
            try:
                code, text, err = remat.run_planner(
                    ["plan", "--budget", "1GB", config, "--micro-batch", "2", "--seq-len", "64"])
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            self.assertEqual(code, 0, err)
            self.assertIn("graph llava (traced): 2 chains, forward vision -> language", text)
            self.assertIn("vision's output (8.00 KiB) read by 1 layer of language", text)

    def test_features_joined_from_several_layers_are_refused(self):
        with self.assertRaises(remat.InputError) as e:
            remat.trace(dict(LLAVA, vision_feature_layer=[-2, -1]), micro_batch=MICRO_BATCH,
                        seq_len=SEQ_LEN, device="cpu")
        self.assertIn("field 'vision_feature_layer': [-2, -1]", str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_images_packed_with_their_grid(self):
        # Qwen2.5-VL's step takes image_grid_thw: traced with the images
        # packed as its processor packs them and each image's grid, held
        # as constants; its windowed blocks are traced once, its
        # full-attention block apart.
        self.assertEqual([l["traced_as"] for l in profile(QWEN2_5_VL).chains["vision"]["layers"]],
                         ["embedding", "block0", "block0", "block2", "head"])
        check_packed_images(self, QWEN2_5_VL, lambda model: model.model.visual)

    def test_features_besides_the_images_are_refused(self):
        # Qwen3-VL's vision tower hands its language model deepstack
        # features besides the image features (its blocks' outputs, added
        # into the first language blocks).
        qwen3_vl = dict(QWEN2_5_VL, model_type="qwen3_vl",
                        architectures=["Qwen3VLForConditionalGeneration"],
                        text_config=dict(QWEN2_5_VL["text_config"], model_type="qwen3_vl_text",
                                         head_dim=16),
                        vision_config=dict(model_type="qwen3_vl", depth=3, hidden_size=48,
                                           intermediate_size=96, num_heads=4, patch_size=4,
                                           spatial_merge_size=2, temporal_patch_size=2,
                                           out_hidden_size=64, num_position_embeddings=64,
                                           deepstack_visual_indexes=[1], image_size=32))
        with self.assertRaises(remat.InputError) as e:
            remat.trace(qwen3_vl, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu")
        self.assertIn("Qwen3VLForConditionalGeneration's vision tower hands its language model "
                      "more than the image features (deepstack_features", str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_more_pooled_tokens_than_patches_are_refused(self):
        # transformers' default Gemma 3 config: 16 x 16 image tokens pooled
        # from a tower of 14 x 14 patches; here 16 x 16 from 8 x 8.
        with self.assertRaises(remat.InputError) as e:
            remat.trace(dict(GEMMA3, mm_tokens_per_image=256), micro_batch=MICRO_BATCH,
                        seq_len=SEQ_LEN, device="cpu")
        self.assertIn("field 'mm_tokens_per_image': 256 (16 x 16) is more than the vision "
                      "tower's 8 x 8 patches", str(e.exception))
        self.assertNotIn("\n", str(e.exception))

    def test_classes_of_configs_with_a_vision_and_a_text_part(self):
        from remat._trace_build import hf_config, model_class

        def kind(config):
            return model_class(hf_config(config))[1]
        self.assertEqual(kind(LLAVA), "vision_language")
        self.assertEqual(kind(dict(LLAVA, architectures=None)), "vision_language")
        # Llama 4's text model alone is a chain.
        self.assertEqual(kind({"model_type": "llama4", "architectures": ["Llama4ForCausalLM"]}),
                         "causal_lm")
        for two_towers in ("clip", "siglip"):
            self.assertEqual(kind({"model_type": two_towers}), "two_towers")

    def test_blocks_after_the_features_are_outside_the_chain(self):
        # LLaVA-1.5's features are the last vision block's input: the
        # vision chain has the blocks before it.
        vision = profile(LLAVA_15).chains["vision"]["layers"]
        self.assertEqual([l["name"] for l in vision], ["embedding", "block0", "block1", "head"])


# Two towers meeting in the contrastive loss: 4 image-text pairs (32 x 32
# images of 8 x 8 patches, texts of SEQ_LEN tokens), text and vision
# blocks of their own widths. CLIP projects both to 32; SigLIP's text head
# projects to the vision width (its pooled image features are the vision
# tower's attention-pooling head's).
PAIRS = 4
_TEXT = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
             num_attention_heads=4, max_position_embeddings=SEQ_LEN)
_VISION = dict(hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
               image_size=32, patch_size=8)
CLIP = dict(model_type="clip", architectures=["CLIPModel"], projection_dim=32,
            text_config=dict(_TEXT, bos_token_id=1, eos_token_id=2, pad_token_id=0),
            vision_config=_VISION)
SIGLIP = dict(model_type="siglip", architectures=["SiglipModel"],
              text_config=dict(_TEXT, projection_size=48, bos_token_id=1, eos_token_id=2,
                               pad_token_id=0), vision_config=_VISION)
TOWERS = (CLIP, SIGLIP)


def towers_profile(config, checkpointing=False):
    key = (config["model_type"], "towers", checkpointing)
    if key not in _profiles:
        _profiles[key] = remat.trace(config, micro_batch=PAIRS, seq_len=SEQ_LEN, device="cpu",
                                     gradient_checkpointing=checkpointing)
    return _profiles[key]


def pairs_batch():
    generator = torch.Generator().manual_seed(1)
    return {"input_ids": torch.randint(4, 256, (PAIRS, SEQ_LEN), generator=generator),
            "pixel_values": torch.randn(PAIRS, 3, 32, 32, generator=generator),
            "return_loss": True}


def towers_applied(config):
    """(plan, budget): two-block segments in both towers (--strategy uniform
    --every 2) at a budget halfway from its peak to that of checkpointing
    nothing."""
    segments = dict(strategy="uniform", every=2)
    low = remat.plan(towers_profile(config), budget="1TB", **segments).predicted_peak_bytes
    high = remat.plan(towers_profile(config), budget="1TB", strategy="none").predicted_peak_bytes
    budget = (low + high) // 2
    return remat.plan(towers_profile(config), budget=budget, **segments), budget


@needs.modules("torch", "transformers")
@needs.meter_library()
class TracedTwoTowersStepTest(unittest.TestCase):
    def test_transformers_step_against_the_plan(self):
        for config in TOWERS:
            for checkpointing in (False, True):
                with self.subTest(model=config["model_type"], checkpointing=checkpointing):
                    plan = remat.plan(towers_profile(config, checkpointing), budget="1TB",
                                      **(dict(strategy="uniform", every=1) if checkpointing
                                         else dict(strategy="none")))

                    def prepare(model):
                        if checkpointing:
                            model.gradient_checkpointing_enable()
                        return model
                    predicted, measured = trained_peak(plan, prepare, config)
                    report(f"{config['model_type']} checkpointing={checkpointing}",
                           predicted, measured)
                    self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)

    def test_applied_plan_against_its_prediction_and_eager_gradients(self):
        for config in TOWERS:
            with self.subTest(model=config["model_type"]):
                plan, budget = towers_applied(config)
                blocks = checkpointed_blocks(plan)
                self.assertEqual(blocks, {"vision": ["block0", "block1", "block2"],
                                          "text": ["block0", "block1", "block2"]})
                check_applied_peak(self, plan, budget, config)
                model = build(config)
                check_applied_gradients(self, model, pairs_batch(), plan,
                                        (model.vision_model.encoder.layers,
                                         model.text_model.encoder.layers))


@needs.modules("torch", "transformers")
class TwoTowersGraphTest(unittest.TestCase):
    def test_shape(self):
        for config in TOWERS:
            with self.subTest(model=config["model_type"]):
                chains = towers_profile(config).chains
                self.assertEqual(list(chains), ["vision", "text"])
                text = chains["text"]["layers"]
                self.assertEqual(towers_profile(config).json["edges"],
                                 [{"from": "vision", "to": "text", "readers": [len(text) - 1]}])
                # The pooled image features: one vector of the vision width
                # per image.
                self.assertEqual(chains["vision"]["layers"][-1]["output_bytes"], PAIRS * 48 * 4)
                for layers in (chains["vision"]["layers"], text):
                    self.assertEqual([l["kind"] for l in layers],
                                     ["embedding", "block", "block", "block", "head"])
                with torch.device("meta"):
                    model = build(config)
                self.assertEqual(sum(c["parameters"] for c in chains.values()),
                                 sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    unittest.main()
