"""Plan.export(engine): what a training engine takes for a plan, fed to the
engines' own configuration parsers where they are installed:
  hf          transformers.TrainingArguments(**fields);
  deepspeed   deepspeed.runtime.config.DeepSpeedConfig(path of the JSON, as
              printed): the config DeepSpeed's engine builds from a
              ds_config.json;
  megatron    megatron-core ships no command-line parser (Megatron-LM's
              megatron/training/arguments.py is not in the megatron-core
              package), so each flag is read as argparse reads it (its dest:
              dashes to underscores; no value: True; several values: a list,
              as --recompute-modules' nargs='*'), and every flag but the batch
              sizes must be a field of megatron.core's TransformerConfig,
              which is built from them (its __post_init__ checks the recompute
              fields together); the batch sizes go to megatron.core's
              ConstantNumMicroBatchesCalculator (one data-parallel rank),
              which checks that they divide and gives the accumulation;
  torchtitan  torchtitan.config.manager.ConfigManager().parse_args(
              ["--job.config_file", TOML]), torchtitan's own loader.
Each is fed the plans of several strategies and precisions and the goldens
of tests/golden (gpt2-small.24GB.*export*), and the values it read are
compared with the plan's job.

Run by CTest (label "python") like remat_plan_test: PYTHONPATH=build/python
and PLANNER the build's `planner`. Each engine's check is skipped, visibly,
where that engine is not importable.
"""
import dataclasses
import json
import os
import subprocess
import tempfile
import tomllib
import unittest
from unittest import mock

import needs
import remat

SOURCE = os.environ.get("REMAT_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
PLANNER = os.environ["PLANNER"]
GPT2 = os.path.join(SOURCE, "examples", "gpt2-small.json")

transformers = needs.optional("transformers")
deepspeed_config = needs.optional("deepspeed.runtime.config")
megatron_batches = TransformerConfig = TorchtitanConfigManager = None
if not needs.missing("megatron.core"):
    from megatron.core import num_microbatches_calculator as megatron_batches
    from megatron.core.transformer.transformer_config import TransformerConfig
if not needs.missing("torchtitan"):
    from torchtitan.config.manager import ConfigManager as TorchtitanConfigManager

GOLDEN = os.path.join(SOURCE, "tests", "golden", "gpt2-small.24GB.")
# GPT-2 small's shape, which TransformerConfig needs besides the recompute fields.
GPT2_SHAPE = dict(num_layers=12, hidden_size=768, num_attention_heads=12)
# Plans of every shape the engines take (and some they do not: the closest
# plan is exported), in each precision family.
PLANS = ({"every": 1}, {"every": 4}, {"strategy": "none", "micro_batch": 2},
         {"strategy": "selective"}, {"checkpoint_layers": [0, 1, 2]},
         {"checkpoint_layers": [0, 4, 8]}, {"precision": "amp_fp16", "every": 2},
         {"precision": "fp32", "grad_accumulation": 4, "every": 3},
         {"precision": "mixed_bf16", "every": 6})


def cases(engine, *goldens):
    """(name, exported text, micro-batch, accumulation) for each of PLANS,
    then for each golden (tests/golden/gpt2-small.24GB.SUFFIX: micro-batch
    16, one micro-batch per step)."""
    for options in PLANS:
        plan = remat.plan(GPT2, budget="24GB", **options)
        yield json.dumps(options), str(plan.export(engine)), plan.micro_batch, plan.grad_accumulation
    for suffix in goldens:
        with open(GOLDEN + suffix) as f:
            yield suffix, f.read(), 16, 1


def written(directory, name, text):
    """The path of `text` written to directory/name."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def megatron_flags(text):
    """Megatron-LM's flags as argparse reads them: {dest: value}."""
    flags, name = {}, None
    for token in text.split():
        if token.startswith("--"):
            name = token[2:].replace("-", "_")
            flags[name] = True
        elif name is None:
            raise AssertionError(f"value {token} before any flag")
        else:
            value = int(token) if token.isdigit() else token
            flags[name] = value if flags[name] is True else (
                flags[name] + [value] if isinstance(flags[name], list) else [flags[name], value])
    if isinstance(flags.get("recompute_modules"), str):  # nargs='*'
        flags["recompute_modules"] = [flags["recompute_modules"]]
    return flags


def torchtitan_job(test, text, directory):
    """torchtitan's JobConfig of the TOML `text`, each of its keys checked read as written."""
    job = TorchtitanConfigManager().parse_args(
        ["--job.config_file", written(directory, "job.toml", text)])
    for section, values in tomllib.loads(text).items():
        for key, value in values.items():
            test.assertEqual(getattr(getattr(job, section), key), value, f"[{section}] {key}")
    return job


def command(*args):
    r = subprocess.run([PLANNER, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


class Export(unittest.TestCase):
    def test_export_is_the_commands_output(self):
        plan = remat.plan(GPT2, budget="24GB", checkpoint_layers=[1, 4, 8], micro_batch=4)
        for engine in ("pytorch", "hf", "deepspeed", "megatron", "torchtitan"):
            exported = plan.export(engine)
            code, out, err = command("--budget", "24GB", "--export", engine, "--quiet",
                                     "--checkpoint-layers", "1,4,8", "--micro-batch", "4", GPT2)
            self.assertEqual(code, 0, err)
            self.assertEqual(exported, out)
            self.assertEqual(exported.engine, engine)
            self.assertIn(exported.note, err)
        self.assertIn("cannot express manual (blocks 1,4,8)", plan.export("hf").note)
        # Blocks 0, 4, 8 are transformers' every_n_layers 4.
        every4 = remat.plan(GPT2, budget="24GB", checkpoint_layers=[0, 4, 8], micro_batch=4)
        self.assertIn("hf runs the plan exactly", every4.export("hf").note)
        kwargs = json.loads(every4.export("hf"))["gradient_checkpointing_kwargs"]
        self.assertEqual(kwargs["every_n_layers"], 4)

    def test_unknown_engine_is_input_error(self):
        plan = remat.plan(GPT2, budget="24GB")
        with self.assertRaises(remat.InputError) as e:
            plan.export("colossal")
        self.assertIn("pytorch, hf, deepspeed, megatron, torchtitan", str(e.exception))

    def test_a_plan_not_made_by_remat_plan_cannot_export(self):
        plan = remat.plan(GPT2, budget="24GB")
        with self.assertRaises(ValueError):
            remat.Plan(plan.json).export("hf")

    @needs.modules("transformers")
    def test_hf_fields_are_training_arguments(self):
        for name, text, micro_batch, accumulation in cases(
                "hf", "export-hf.json", "every1.export-hf.json"):
            with self.subTest(plan=name), tempfile.TemporaryDirectory() as tmp:
                fields = json.loads(text)
                # use_cpu: transformers refuses bf16 where no device has it;
                # the fields are what is checked here, on any machine.
                args = transformers.TrainingArguments(output_dir=tmp, use_cpu=True, **fields)
                for key, value in fields.items():
                    self.assertEqual(getattr(args, key), value, key)
                self.assertEqual(args.per_device_train_batch_size, micro_batch)
                self.assertEqual(args.gradient_accumulation_steps, accumulation)
        fields = json.loads(remat.plan(GPT2, budget="24GB", precision="fp32").export("hf"))
        self.assertTrue(fields.get("bf16") is None and fields.get("fp16") is None)
        self.assertNotIn("optim", fields)
        # bitsandbytes' 8-bit AdamW, as planned.
        fields = json.loads(remat.plan(GPT2, budget="24GB", optimizer="adamw8bit").export("hf"))
        self.assertEqual(fields["optim"], "adamw_bnb_8bit")
        with tempfile.TemporaryDirectory() as tmp:
            args = transformers.TrainingArguments(output_dir=tmp, use_cpu=True, **fields)
            self.assertEqual(args.optim, transformers.training_args.OptimizerNames.ADAMW_BNB)
        # bitsandbytes' paged 8-bit AdamW and torchao's 8-bit and 4-bit AdamW,
        # by transformers' names; torchao's fp8 AdamW has none.
        names = transformers.training_args.OptimizerNames
        for optimizer, name in (("paged_adamw8bit", names.PAGED_ADAMW_8BIT),
                                ("torchao_adamw8bit", names.ADAMW_TORCH_8BIT),
                                ("torchao_adamw4bit", names.ADAMW_TORCH_4BIT),
                                ("torchao_adamw_fp8", None)):
            with self.subTest(optimizer=optimizer):
                fields = json.loads(remat.plan(GPT2, budget="24GB", optimizer=optimizer).export("hf"))
                self.assertEqual(fields.get("optim"), name and name.value)
                with tempfile.TemporaryDirectory() as tmp:
                    args = transformers.TrainingArguments(output_dir=tmp, use_cpu=True, **fields)
                    if name:
                        self.assertEqual(args.optim, name)

    @needs.modules("deepspeed")
    def test_deepspeed_config_is_accepted(self):
        for name, text, micro_batch, accumulation in cases("deepspeed", "export-deepspeed.json"):
            with self.subTest(plan=name), tempfile.TemporaryDirectory() as tmp:
                config = json.loads(text)
                # One rank: world size 1.
                ds = deepspeed_config.DeepSpeedConfig(written(tmp, "ds_config.json", text))
                self.assertEqual(ds.train_micro_batch_size_per_gpu, micro_batch)
                self.assertEqual(ds.gradient_accumulation_steps, accumulation)
                self.assertEqual(ds.train_batch_size, micro_batch * accumulation)
                self.assertEqual(ds.bfloat16_config.enabled, "bf16" in config)
                self.assertEqual(ds.float16_config.enabled if hasattr(ds, "float16_config")
                                 else ds.fp16_enabled, "fp16" in config)
                for key, value in config.get("activation_checkpointing", {}).items():
                    self.assertEqual(getattr(ds.activation_checkpointing_config, key), value, key)

    @needs.modules("megatron.core")
    def test_megatron_flags_are_megatron_core_config(self):
        fields = {f.name for f in dataclasses.fields(TransformerConfig)}
        for name, text, micro_batch, accumulation in cases("megatron", "export-megatron.txt"):
            with self.subTest(plan=name):
                flags = megatron_flags(text)
                batches = megatron_batches.ConstantNumMicroBatchesCalculator(
                    flags.pop("global_batch_size"), flags.pop("micro_batch_size"),
                    data_parallel_size=1, decrease_batch_size_if_needed=False, rank=0)
                self.assertEqual(batches.micro_batch_size, micro_batch)
                self.assertEqual(batches.get(), accumulation)
                self.assertLessEqual(set(flags), fields)
                config = TransformerConfig(**GPT2_SHAPE, **flags)
                for key, value in flags.items():
                    self.assertEqual(getattr(config, key), value, key)
                if config.recompute_method is not None:
                    self.assertLessEqual(config.recompute_num_layers, GPT2_SHAPE["num_layers"])

    @needs.modules("torchtitan")
    def test_torchtitan_toml_is_a_job_config(self):
        for name, text, micro_batch, accumulation in cases("torchtitan",
                                                           "export-torchtitan.toml"):
            with self.subTest(plan=name), tempfile.TemporaryDirectory() as tmp:
                job = torchtitan_job(self, text, tmp)
                self.assertEqual(job.training.local_batch_size, micro_batch)
                self.assertEqual(job.training.global_batch_size, micro_batch * accumulation)
                self.assertIn(job.activation_checkpoint.mode, ("none", "full", "selective"))
                if job.activation_checkpoint.mode == "selective":
                    self.assertTrue(job.activation_checkpoint.selective_ac_option.isdigit())


class _DataParallelGroup:
    """The one thing DeepSpeedConfig asks a model-parallel unit: the data ranks."""

    def __init__(self, size):
        self.size = size

    def get_data_parallel_world_size(self):
        return self.size


class ParallelExport(unittest.TestCase):
    """Exports of plans for several ranks, read by the engines' parsers."""

    @needs.modules("deepspeed")
    def test_deepspeed_zero_stage_and_batch_over_the_data_ranks(self):
        for options, stage in (({"zero": 1}, 1), ({"zero": 2}, 2), ({"zero": 3}, 3),
                               ({"fsdp": "full_shard"}, 3), ({"ddp": True}, 0)):
            with self.subTest(options=options), tempfile.TemporaryDirectory() as tmp:
                plan = remat.plan(GPT2, budget="24GB", gpus=8, grad_accumulation=2, **options)
                text = str(plan.export("deepspeed"))
                with mock.patch.object(deepspeed_config.dist, "get_rank", lambda: 0):
                    ds = deepspeed_config.DeepSpeedConfig(written(tmp, "ds.json", text),
                                                          mpu=_DataParallelGroup(8))
                self.assertEqual(ds.world_size, 8)
                self.assertEqual(ds.zero_optimization_stage, stage)
                self.assertEqual(ds.train_batch_size, plan.micro_batch * 2 * 8)
                if stage >= 1:  # the bucket the planner counts: 25 MiB of fp32 elements
                    self.assertEqual(ds.zero_config.reduce_bucket_size, 25 * 2**20 // 4)
                if stage == 3:  # the persistence threshold it assumes (DeepSpeed's default)
                    self.assertEqual(ds.zero_config.param_persistence_threshold, 100000)

    @needs.modules("megatron.core")
    def test_megatron_parallel_sizes_are_megatron_core_config(self):
        from megatron.core.optimizer.optimizer_config import OptimizerConfig
        plan = remat.plan(GPT2, budget="24GB", gpus=16, tp=4, sp=True, pp=2, zero=1,
                          grad_accumulation=4)
        flags = megatron_flags(str(plan.export("megatron")))
        self.assertIs(flags.pop("use_distributed_optimizer"), True)
        self.assertTrue(OptimizerConfig(use_distributed_optimizer=True).use_distributed_optimizer)
        batches = megatron_batches.ConstantNumMicroBatchesCalculator(
            flags.pop("global_batch_size"), flags.pop("micro_batch_size"),
            data_parallel_size=2, decrease_batch_size_if_needed=False, rank=0)
        self.assertEqual(batches.get(), 4)
        # Megatron-LM sets pipeline_dtype from --bf16 / --fp16 (arguments.py).
        import torch
        config = TransformerConfig(**GPT2_SHAPE, **flags, pipeline_dtype=torch.bfloat16)
        self.assertEqual(config.tensor_model_parallel_size, 4)
        self.assertEqual(config.pipeline_model_parallel_size, 2)
        self.assertTrue(config.sequence_parallel)

    @needs.modules("torchtitan")
    def test_torchtitan_parallelism_is_a_job_config(self):
        for options, degrees in (
                ({"gpus": 8, "fsdp": "hybrid_shard", "shard_group": 4}, (2, 4, 1, 1)),
                ({"gpus": 8, "tp": 2, "pp": 2, "fsdp": "shard_grad_op"}, (1, 2, 2, 2)),
                ({"gpus": 4, "ddp": True}, (4, 1, 1, 1))):
            with self.subTest(options=options), tempfile.TemporaryDirectory() as tmp:
                text = str(remat.plan(GPT2, budget="24GB", **options).export("torchtitan"))
                job = torchtitan_job(self, text, tmp)
                p = job.parallelism
                self.assertEqual((p.data_parallel_replicate_degree, p.data_parallel_shard_degree,
                                  p.tensor_parallel_degree, p.pipeline_parallel_degree), degrees)


if __name__ == "__main__":
    unittest.main()
