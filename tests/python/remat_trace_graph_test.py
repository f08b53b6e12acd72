"""python/remat/_trace_graph.py: an encoder-decoder traced as a graph
profile (docs/graphs.md: the encoder's chain, the decoder's, the encoder's
output read by every decoder block), planned by the planner's graph plan,
against a real training step metered by remat's CPU meter.

  - a small T5, BART and Whisper from their config.json (transformers'
    ...ForConditionalGeneration), trained for one AdamW step by
    transformers without and with its gradient checkpointing (every block
    of the encoder and the decoder), metered: the graph plan with nothing
    checkpointed (--strategy none) and with every block of both chains
    (--strategy uniform --every 1, of the model traced as transformers'
    checkpointing runs it: remat.trace(gradient_checkpointing=True), with
    which T5's cross-attention makes its zero position bias with grad)
    predicts the step's peak within 3% (the fidelity target,
    docs/fidelity.md);
  - the graph's shape: two chains, one edge from the encoder to every
    decoder block, its bytes the encoder's output; the parameters of both
    chains add up to transformers' count on the meta device;
  - python -m remat trace writes the graph profile, which the planner
    plans as a graph; transformers' default T5 config (no
    decoder_start_token_id) traces with T5's pad_token_id as the decoder's
    start, and says so; mBART's needs none; a BART config without one is
    refused in one line.

Run by CTest (label "python") with PYTHONPATH=build/python plus python/;
skipped, visibly, where torch, transformers or the meter is missing
(tests/python/needs.py). Models are tiny, fp32 on CPU, dropout off. The
meter is loaded before torch allocates anything.
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

from traced_steps import adamw_step_peak, remat_measure, torch, transformers  # the meter first

PEAK_TOLERANCE = 0.03
MICRO_BATCH, SEQ_LEN = 2, 64
T5 = dict(model_type="t5", architectures=["T5ForConditionalGeneration"], d_model=64, d_ff=128,
          num_layers=3, num_decoder_layers=3, num_heads=4, d_kv=16, vocab_size=128,
          relative_attention_num_buckets=8, dropout_rate=0.0, decoder_start_token_id=0,
          pad_token_id=0, eos_token_id=1)
BART = dict(model_type="bart", architectures=["BartForConditionalGeneration"], d_model=64,
            encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_layers=3, decoder_layers=3,
            encoder_attention_heads=4, decoder_attention_heads=4, vocab_size=128,
            max_position_embeddings=128, dropout=0.0, attention_dropout=0.0,
            activation_dropout=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
            decoder_start_token_id=2, forced_eos_token_id=2)
# mBART starts its decoder input at the labels' last token (its
# shift_tokens_right takes no start token): a config without
# decoder_start_token_id, as transformers' default mbart config has none.
MBART = dict(BART, model_type="mbart", architectures=["MBartForConditionalGeneration"],
             decoder_start_token_id=None)
# Whisper's encoder reads log-mel frames: 2 x max_source_positions of them
# (two convolutions, the second strided), num_mel_bins each.
WHISPER = dict(model_type="whisper", architectures=["WhisperForConditionalGeneration"],
               d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_layers=3,
               decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
               vocab_size=128, num_mel_bins=16, max_source_positions=SEQ_LEN,
               max_target_positions=SEQ_LEN, dropout=0.0, attention_dropout=0.0,
               activation_dropout=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
               decoder_start_token_id=3)


@needs.modules("torch", "transformers")
@needs.meter_library()
class TracedGraphStepTest(unittest.TestCase):
    def step_against_plan(self, config, profile, checkpointing):
        """(predicted, measured) peak bytes: a fresh model of `config`
        trained one step by transformers (with checkpointing: its
        gradient_checkpointing_enable(), every block of both chains),
        metered, and the traced graph's plan of the same (--strategy none,
        or uniform --every 1)."""
        gc.collect()
        start = remat_measure.load().current_bytes()
        torch.manual_seed(0)
        cfg = transformers.AutoConfig.for_model(**config)
        cfg.use_cache = False
        model = getattr(transformers, config["architectures"][0])(cfg).train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        ids = (MICRO_BATCH, SEQ_LEN)  # 4 and above: no special token
        if config is WHISPER:
            source = {"input_features": torch.randn(
                MICRO_BATCH, config["num_mel_bins"], 2 * config["max_source_positions"])}
        else:
            source = {"input_ids": torch.randint(4, config["vocab_size"], ids)}
        batch = dict(source, labels=torch.randint(4, config["vocab_size"], ids))
        plan = remat.plan(profile, budget="1TB", strategy="uniform" if checkpointing else "none",
                          **({"every": 1} if checkpointing else {}))
        self.assertIsInstance(plan, remat.GraphPlan)
        measured = adamw_step_peak(model, batch, start)
        predicted = plan.predicted_peak_bytes
        print(f"{config['model_type']} checkpointing={checkpointing}: predicted {predicted:,} B, "
              f"measured {measured:,} B ({(measured - predicted) / predicted:+.2%})")
        return predicted, measured  # the model is freed before the next case's start

    def check(self, config, cases=(False, True)):
        """Per case, `config` traced as the step runs it (with
        checkpointing: as transformers' checkpointing runs it) and the
        step's peak against the plan's within PEAK_TOLERANCE. Returns the
        profile traced without checkpointing."""
        profiles = {}
        for checkpointing in cases:
            with self.subTest(checkpointing=checkpointing):
                profile = profiles[checkpointing] = remat.trace(
                    config, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu",
                    gradient_checkpointing=checkpointing)
                predicted, measured = self.step_against_plan(config, profile, checkpointing)
                self.assertLessEqual(abs(measured - predicted) / predicted, PEAK_TOLERANCE)
        return profiles[False]

    def test_t5_from_its_config(self):
        # Under transformers' checkpointing T5's cross-attention makes its
        # zero position bias with grad (T5Attention reads the flag): from a
        # trace without the flag, the plan checkpointing every block
        # predicts 318,152 B (6.57%) below that step.
        self.check_shape(self.check(T5), T5)

    def test_checkpointing_flags_traced(self):
        # T5 traced as transformers' checkpointing runs it: the trace says
        # so, and the zero position bias's gradient (1 x 4 x 64 x 64
        # floats), summed over the decoder blocks' backwards, is the last
        # decoder block's to create.
        plain = remat.trace(T5, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu")
        flagged = remat.trace(T5, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, device="cpu",
                              gradient_checkpointing=True)
        self.assertNotIn("gradient_checkpointing", plain.trace)
        self.assertEqual(flagged.trace["gradient_checkpointing"], "transformers")
        def last_block(profile):
            return [l for l in profile.chains["decoder"]["layers"] if l["kind"] == "block"][-1]
        bias = 4 * SEQ_LEN * SEQ_LEN * 4
        self.assertEqual(last_block(flagged)["gradient_bytes"] - last_block(plain)["gradient_bytes"],
                         bias)

    def test_bart_from_its_config(self):
        self.check_shape(self.check(BART), BART)

    def test_mbart_without_a_decoder_start(self):
        profile = self.check(MBART)
        self.check_shape(profile, MBART)
        self.assertNotIn("assumed", profile.trace)

    def test_whisper_from_its_config(self):
        self.check_shape(self.check(WHISPER), WHISPER)

    def check_shape(self, profile, config):
        chains = profile.chains
        self.assertEqual(list(chains), ["encoder", "decoder"])
        decoder = chains["decoder"]["layers"]
        blocks = [i for i, l in enumerate(decoder) if l["kind"] == "block"]
        self.assertEqual(len(blocks), 3)
        self.assertEqual(profile.json["edges"],
                         [{"from": "encoder", "to": "decoder", "readers": blocks}])
        hidden = MICRO_BATCH * SEQ_LEN * 64 * 4
        self.assertEqual(chains["encoder"]["layers"][-1]["output_bytes"], hidden)
        with torch.device("meta"):
            model = getattr(transformers, config["architectures"][0])(
                transformers.AutoConfig.for_model(**config))
        self.assertEqual(sum(c["parameters"] for c in chains.values()),
                         sum(p.numel() for p in model.parameters()))


@needs.modules("torch", "transformers")
class TraceGraphCommandTest(unittest.TestCase):
    def test_command_writes_a_graph_the_planner_plans(self):
        with tempfile.TemporaryDirectory() as d:
            config, out = os.path.join(d, "config.json"), os.path.join(d, "profile.json")
            with open(config, "w") as f:
                json.dump(dict(T5, dtype=None), f)
            r = subprocess.run([sys.executable, "-m", "remat", "trace", config, "-o", out,
                                "--micro-batch", "2", "--seq-len", "16"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            code, text, err = remat.run_planner(["plan", "--budget", "1GB", out])
            self.assertEqual(code, 0, err)
            self.assertIn("2 chains, forward encoder -> decoder", text)
            self.assertIn("encoder's output (8.00 KiB) read by 3 layers of decoder", text)

    def test_default_t5_config_starts_its_decoder_at_the_pad_token(self):
        # transformers' default T5 config has no decoder_start_token_id; T5
        # shifts its labels right after it, which T5 sets to pad_token_id.
        with tempfile.TemporaryDirectory() as d:
            config, out = os.path.join(d, "config.json"), os.path.join(d, "profile.json")
            with open(config, "w") as f:
                f.write(transformers.AutoConfig.for_model("t5").to_json_string())
            r = subprocess.run([sys.executable, "-m", "remat", "trace", config, "-o", out,
                                "--micro-batch", "1", "--seq-len", "8"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            note = ("decoder_start_token_id missing: pad_token_id (0) taken, as transformers' "
                    "T5ForConditionalGeneration shifts the labels right after it")
            self.assertIn(f"python -m remat trace: {config}: {note}", r.stderr)
            with open(out) as f:  # each chain's profile carries the trace's note
                for chain in json.load(f)["chains"]:
                    self.assertEqual(chain["profile"]["trace"]["assumed"], [note])

    def test_config_without_a_decoder_start_refused(self):
        # BART starts its decoder input at decoder_start_token_id and has no
        # other value for it.
        with self.assertRaises(remat.InputError) as caught:
            remat.trace(dict(BART, decoder_start_token_id=None), micro_batch=1, seq_len=8)
        self.assertEqual(caught.exception.message,
                         "remat.trace: bart config: field 'decoder_start_token_id': missing (an "
                         "encoder-decoder's decoder input starts with it; accepted: a token id)")

    def test_planner_plans_a_config_it_traces_as_a_graph(self):
        # planner/cli/traced_input.cc runs $REMAT_PYTHON -m remat trace; a
        # graph profile back is planned as a graph, with the job's sizes
        # taken in by the trace; pareto, which takes one chain, refuses it.
        saved = {k: os.environ.get(k) for k in ("REMAT_PYTHON", "REMAT_TRACE_CACHE")}
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "config.json")
            with open(config, "w") as f:
                json.dump(BART, f)
            os.environ["REMAT_PYTHON"] = sys.executable
            os.environ["REMAT_TRACE_CACHE"] = os.path.join(d, "cache")
            try:
                flags = ["--micro-batch", "2", "--seq-len", "16"]
                code, text, err = remat.run_planner(["plan", "--budget", "1GB", config] + flags)
                pareto = remat.run_planner(["pareto", config] + flags)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            self.assertEqual(code, 0, err)
            self.assertIn("2 chains, forward encoder -> decoder", text)
            self.assertIn("encoder's output (8.00 KiB) read by 3 layers of decoder", text)
            self.assertEqual(pareto[0], 2)
            self.assertEqual(len(pareto[2].strip().splitlines()), 1, pareto[2])
            self.assertIn("traces as a graph of chains", pareto[2])


if __name__ == "__main__":
    unittest.main()
