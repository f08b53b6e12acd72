"""python/remat/_apply_graph.py: remat.apply of a graph plan (an
encoder-decoder's remat.GraphPlan) on the real model, against the plan's
prediction and the eager model's gradients.

  - a small T5, BART and Whisper (the configs of remat_trace_graph_test),
    traced as graph profiles, planned with nothing checkpointed (--strategy
    none), every block of both chains checkpointed (uniform --every 1) and,
    on BART and Whisper, two-block segments (uniform --every 2); each plan
    applied to a fresh model trained one AdamW step, metered by remat's CPU
    meter: the peak within 3% of the plan's prediction (the fidelity
    target, docs/fidelity.md);
  - the gradients with the plan applied equal the eager model's: fp32 on
    CPU, dropout off, a recompute runs the same ops on the same inputs in
    the same order, so they agree to rounding (1e-6 relative, far above
    fp32's 6e-8 and far below any real difference);
  - T5's blocks hand the position bias from block to block, so a segment
    of two T5 blocks is refused, as are plans of another model: another
    number of chains, of blocks in a chain, a decision outside the blocks,
    another shape (each one line naming what and where).

Run by CTest (label "python") with PYTHONPATH=build/python plus python/;
skipped, visibly, where torch, transformers or the meter is missing
(tests/python/needs.py). The meter is loaded before torch allocates
anything.
"""
import copy
import gc
import unittest

import needs
import remat

from traced_steps import adamw_step_peak, remat_measure, torch, transformers  # the meter first

import remat_trace_graph_test as graph  # the configs (module, not names: its cases stay its own)

PEAK_TOLERANCE = 0.03
RELATIVE = 1e-6
MICRO_BATCH, SEQ_LEN = graph.MICRO_BATCH, graph.SEQ_LEN
PLANS = {"none": dict(strategy="none"), "every 1": dict(strategy="uniform", every=1),
         "every 2": dict(strategy="uniform", every=2)}
_profiles = {}


def profile_of(config):
    key = config["model_type"]
    if key not in _profiles:
        _profiles[key] = remat.trace(config, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN,
                                     device="cpu")
    return _profiles[key]


def build(config):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config)
    cfg.use_cache = False
    return getattr(transformers, config["architectures"][0])(cfg).train()


def batch_of(config, micro_batch=MICRO_BATCH):
    generator = torch.Generator().manual_seed(1)
    ids = (micro_batch, SEQ_LEN)  # 4 and above: no special token
    if config is graph.WHISPER:
        source = {"input_features": torch.randn(
            micro_batch, config["num_mel_bins"], 2 * config["max_source_positions"],
            generator=generator)}
    else:
        source = {"input_ids": torch.randint(4, config["vocab_size"], ids, generator=generator)}
    return dict(source, labels=torch.randint(4, config["vocab_size"], ids, generator=generator))


@needs.modules("torch", "transformers")
@needs.meter_library()
class AppliedGraphPlanStepTest(unittest.TestCase):
    def applied_step(self, config, which):
        """(predicted, measured) peak bytes of the plan `which` (PLANS)
        applied to a fresh model trained one AdamW step, metered."""
        plan = remat.plan(profile_of(config), budget="1TB", **PLANS[which])
        self.assertIsInstance(plan, remat.GraphPlan)
        gc.collect()
        start = remat_measure.load().current_bytes()
        model = remat.apply(build(config), plan)
        batch = batch_of(config)
        measured = adamw_step_peak(model, batch, start)
        predicted = plan.predicted_peak_bytes
        print(f"{config['model_type']} {which} applied: predicted {predicted:,} B, "
              f"measured {measured:,} B ({(measured - predicted) / predicted:+.2%})")
        return predicted, measured

    def check(self, config, plans):
        for which in plans:
            with self.subTest(plan=which):
                predicted, measured = self.applied_step(config, which)
                self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)

    def test_bart(self):
        self.check(graph.BART, ("none", "every 1", "every 2"))

    def test_whisper(self):
        self.check(graph.WHISPER, ("none", "every 1", "every 2"))

    def test_t5(self):
        # T5's block0 hands its position bias, made with grad, to the other
        # blocks: the trace has its gradient created by the last block given
        # it (_layer_measure.shared_input_tensors).
        self.check(graph.T5, ("none", "every 1"))


@needs.modules("torch", "transformers")
class AppliedGraphPlanTest(unittest.TestCase):
    def gradients(self, model, batch):
        model.zero_grad()
        model(**batch).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    def test_gradients_equal_the_eager_models(self):
        for config in (graph.T5, graph.BART, graph.WHISPER):
            for which in ("every 1",) + (("every 2",) if config is not graph.T5 else ()):
                with self.subTest(model=config["model_type"], plan=which):
                    plan = remat.plan(profile_of(config), budget="1TB", **PLANS[which])
                    model, batch = build(config), batch_of(config)
                    eager = self.gradients(model, batch)
                    block = model.get_decoder().layers[0] if hasattr(
                        model.get_decoder(), "layers") else model.get_decoder().block[0]
                    remat.apply(model, plan)
                    self.assertIn("forward", block.__dict__)  # its forward replaced
                    applied = self.gradients(model, batch)
                    self.assertEqual(applied.keys(), eager.keys())
                    for name, g in eager.items():
                        scale = g.abs().max().item() or 1.0
                        self.assertLessEqual((applied[name] - g).abs().max().item(),
                                             RELATIVE * scale, name)
                    remat.unapply(model)
                    self.assertNotIn("forward", block.__dict__)

    def refused(self, model, plan, *parts):
        with self.assertRaises(remat.InputError) as caught:
            remat.apply(model, plan)
        message = caught.exception.message
        self.assertEqual(len(message.splitlines()), 1, message)
        for part in parts:
            self.assertIn(part, message)
        return message

    def test_t5_segment_of_two_blocks_refused(self):
        plan = remat.plan(profile_of(graph.T5), budget="1TB", **PLANS["every 2"])
        model = remat.apply(build(graph.T5), plan)
        with self.assertRaises(remat.InputError) as caught:
            model(**batch_of(graph.T5)).loss.backward()
        self.assertIn("block1 gets a tensor made with grad that block0", caught.exception.message)

    def test_plans_of_another_model_refused(self):
        plan = remat.plan(profile_of(graph.BART), budget="1TB", **PLANS["every 1"]).json
        model = build(graph.BART)
        three = copy.deepcopy(plan)
        three["chains"].append(dict(three["chains"][1], name="vision"))
        self.refused(model, three, "the graph plan has 3 chains (encoder, decoder, vision)",
                     "BartForConditionalGeneration has 2 (encoder: BartEncoder.layers (3 "
                     "blocks), decoder: BartDecoder.layers (3 blocks))")
        four = copy.deepcopy(plan)
        decoder = four["chains"][1]
        for key in ("decisions", "layer_names", "input_bytes"):
            decoder[key].insert(-1, decoder[key][-2])
        decoder["layer_names"][-2] = "block3"
        self.refused(model, four, "chain 'decoder' has 4 blocks",
                     "the model's decoder (BartDecoder.layers) has 3")
        embedding = copy.deepcopy(plan)
        embedding["chains"][0]["decisions"][0] = "checkpoint"
        self.refused(model, embedding, "chain 'encoder' has 'checkpoint' on its layer embedding",
                     "outside_blocks='keep'")
        remat.apply(model, embedding, outside_blocks="keep")  # run as keep
        remat.unapply(model)
        bare = copy.deepcopy(plan)
        del bare["chains"][0]["layer_names"]
        self.refused(model, bare, "chain 'encoder' has no layer_names")
        self.refused(build(dict(graph.BART, architectures=["BartForCausalLM"])), plan,
                     "BartForCausalLM is not an encoder-decoder")
        self.assertNotIn("_remat_applied", model.__dict__)  # nothing left applied

    def test_another_shape_refused_at_the_first_forward(self):
        plan = remat.plan(profile_of(graph.BART), budget="1TB", **PLANS["every 1"])
        model = remat.apply(build(graph.BART), plan)
        with self.assertRaises(remat.InputError) as caught:
            model(**batch_of(graph.BART, micro_batch=1))
        self.assertIn("encoder's block0's input 32768 bytes", caught.exception.message)
        self.assertIn("got a (1, 64, 64) torch.float32 input (16384 bytes)",
                      caught.exception.message)


if __name__ == "__main__":
    unittest.main()
