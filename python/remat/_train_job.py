"""What `python -m remat train` runs, read from the plan and config.json
and checked before any process starts: the engine, the ranks, the
per-rank micro-batch and accumulation, the global batch and the data
each rank takes of it.

Shared by the launcher (_train_cli) and every rank (_train_rank); the
data (global_batch, rank_rows) is what a 1-process reference run over the
same global batch uses too.
"""
import json
import os

from ._planner import EXIT_BAD_INPUT, InputError

ENGINES = ("ddp", "fsdp2", "deepspeed", "tp")
# job.parallel.data values each engine runs as planned.
ENGINE_DATA = {"ddp": ("none", "ddp"), "fsdp2": ("fsdp2",), "deepspeed": ("zero1", "zero2", "zero3"),
               "tp": ("none",)}
ATTENTION = ("eager", "sdpa")
DATA_SEED = 1000  # step s's global batch: torch.Generator seeded DATA_SEED + s


def _error(message):
    return InputError("remat train: " + message, EXIT_BAD_INPUT)


def _load(path, what):
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise _error(f"cannot read {what} {path}: {e}")
    if not isinstance(value, dict):
        raise _error(f"{what} {path}: not a JSON object")
    return value


class Job:
    """One run: engine, nproc, the plan (dict) and config (dict), and what
    follows from them. Raises InputError (exit code 2, one line) for a
    run that cannot be carried out as asked."""

    def __init__(self, engine, nproc, plan_path, config_path, steps=2, grad_accumulation=None,
                 global_batch=None, zero=None, seed=0, timeout_s=60.0):
        if engine not in ENGINES:
            raise _error(f"--engine {engine}: accepted: {', '.join(ENGINES)}")
        if nproc < 1:
            raise _error(f"--nproc {nproc}: must be at least 1")
        if steps < 1:
            raise _error(f"--steps {steps}: must be at least 1")
        if timeout_s <= 0:
            raise _error(f"--timeout {timeout_s}: must be above 0 seconds")
        self.engine, self.nproc, self.steps, self.seed = engine, nproc, steps, seed
        self.timeout_s = timeout_s
        self.plan_path, self.config_path = os.path.abspath(plan_path), os.path.abspath(config_path)
        self.plan = _load(plan_path, "plan")
        self.config = _load(config_path, "config")
        for key in ("micro_batch", "model", "layers"):
            if key not in self.plan:
                raise _error(f"plan {plan_path}: no '{key}': not a remat plan.json "
                             "(planner --json or remat.plan(...).json)")
        self.micro_batch = int(self.plan["micro_batch"])
        self.seq_len = int(self.plan["model"].get("seq_len") or
                           self.plan.get("profile", {}).get("seq_len") or 0)
        if self.seq_len < 1:
            raise _error(f"plan {plan_path}: no model.seq_len")
        job = self.plan.get("job", {})
        self.attention = job.get("attention", "eager")
        if self.attention not in ATTENTION:
            raise _error(f"plan {plan_path}: job.attention {self.attention}: this run builds "
                         f"the model with {' or '.join(ATTENTION)} attention")
        if job.get("precision", "fp32") != "fp32":
            raise _error(f"plan {plan_path}: job.precision {job.get('precision')}: the runs "
                         "here train in fp32 (plan with --precision fp32)")
        if job.get("lora_rank", 0) or job.get("quantization", "none") != "none":
            raise _error(f"plan {plan_path}: a LoRA or quantized plan: the runs here train "
                         "the full model")
        self.parallel = job.get("parallel")
        self.grad_accumulation = int(grad_accumulation or self.plan.get("grad_accumulation") or 1)
        if self.grad_accumulation < 1:
            raise _error(f"--grad-accumulation {self.grad_accumulation}: must be at least 1")
        self._check_engine(zero)
        self._check_model()
        self._check_batch(global_batch)

    # -- the engine against the plan's parallel settings ------------------

    def _check_engine(self, zero):
        p = self.parallel or {}
        data = p.get("data", "none")
        self.tensor = self.nproc if self.engine == "tp" else 1
        self.data_ranks = self.nproc // self.tensor
        if p:
            if int(p.get("gpus", 1)) != self.nproc:
                raise _error(f"the plan is for {p.get('gpus')} GPUs (job.parallel.gpus), "
                             f"--nproc {self.nproc}: plan with --gpus {self.nproc}")
            if int(p.get("pipeline", 1)) != 1:
                raise _error(f"the plan has {p.get('pipeline')} pipeline stages: no engine "
                             "here runs pipeline parallelism (engines: ddp, fsdp2, deepspeed, tp)")
            if data not in ENGINE_DATA[self.engine]:
                raise _error(f"--engine {self.engine} cannot run a plan made for data "
                             f"parallelism '{data}' (job.parallel.data); it runs "
                             f"{' or '.join(ENGINE_DATA[self.engine])}")
            if int(p.get("tensor", 1)) != self.tensor:
                raise _error(f"the plan's tensor-parallel degree is {p.get('tensor', 1)} "
                             f"(job.parallel.tensor), --engine {self.engine} on {self.nproc} "
                             f"ranks runs {self.tensor}")
            if p.get("sequence"):
                raise _error("the plan uses sequence parallelism (job.parallel.sequence): "
                             "--engine tp here splits the linears only (no SequenceParallel)")
        self.bucket_cap_mb = float(p.get("bucket_cap_mb", 25))
        self.reshard_after_forward = bool(p.get("reshard_after_forward", True))
        # DeepSpeed ZeRO-3's stage3_param_persistence_threshold as planned
        # (DeepSpeed's default where the plan does not say).
        self.persistence_threshold = int(p.get("persistence_threshold", 100000))
        # FSDP2: set_requires_gradient_sync(False) on micro-batches 1..K-1
        # where the plan says so (--fsdp-no-sync), else a reduce-scatter in
        # every micro-batch.
        self.fsdp_no_sync = bool(p.get("fsdp_no_sync", False))
        # FSDP2: one fully_shard unit per block, or per recompute segment
        # where the plan was made with --fsdp-units segment.
        self.fsdp_units = p.get("fsdp_units", "block")
        # State offload as planned: "fsdp_cpu" (--fsdp-cpu-offload, FSDP2's
        # CPUOffloadPolicy), "optimizer" (--offload-optimizer cpu, DeepSpeed
        # ZeRO-Offload), "none".
        self.state_offload = p.get("state_offload", "none")
        self.zero = None
        if self.engine == "deepspeed":
            planned = int(data[4:]) if data.startswith("zero") else None
            if zero is not None and planned is not None and zero != planned:
                raise _error(f"--zero {zero}: the plan is for ZeRO-{planned} "
                             "(job.parallel.data)")
            self.zero = zero if zero is not None else planned
            if self.zero not in (1, 2, 3):
                raise _error("--engine deepspeed needs the ZeRO stage: --zero 1, 2 or 3 (or a "
                             "plan made with --zero)")
        elif zero is not None:
            raise _error(f"--zero {zero}: only for --engine deepspeed")

    # -- the model against the plan -----------------------------------------

    def _check_model(self):
        c = self.config
        if c.get("model_type") is None:
            raise _error(f"config {self.config_path}: no model_type (a Hugging Face "
                         "config.json is needed to build the model)")
        blocks = [l for l in self.plan["layers"] if l.get("kind") == "block"
                  or str(l.get("name", "")).startswith("block")]
        layers = c.get("num_hidden_layers")
        if layers is not None and len(blocks) != layers:
            raise _error(f"the plan has {len(blocks)} blocks, {self.config_path} "
                         f"num_hidden_layers {layers}: a plan made for another model")
        if self.engine == "tp":
            heads = c.get("num_attention_heads", 0)
            kv = c.get("num_key_value_heads", heads)
            ffn = c.get("intermediate_size", 0)
            for name, value in (("num_attention_heads", heads), ("num_key_value_heads", kv),
                                ("intermediate_size", ffn)):
                if not value or value % self.tensor:
                    raise _error(f"--engine tp on {self.tensor} ranks: {name} {value} in "
                                 f"{self.config_path} is not a multiple of {self.tensor}")

    def check_parameters(self, count):
        """The model's parameter count (built from config.json) against the
        plan's; raises InputError for a plan made for another model."""
        planned = self.plan["model"].get("parameters")
        if planned and planned != count:
            raise _error(f"the plan is for {self.plan['model'].get('name')} with {planned:,} "
                         f"parameters, {self.config_path} builds {count:,}: a plan made for "
                         "another model")

    # -- the batch --------------------------------------------------------

    def _check_batch(self, global_batch):
        per_rank = self.micro_batch * self.grad_accumulation
        self.global_batch = per_rank * self.data_ranks
        searched = self.plan.get("global_batch")  # planner --global-batch
        planned = searched.get("global_batch") if isinstance(searched, dict) else None
        want = global_batch or planned
        if want is None:
            return
        if want % self.data_ranks:
            raise _error(f"--nproc {self.nproc} does not divide the global batch {want} "
                         f"({self.data_ranks} data-parallel ranks)")
        if want != self.global_batch:
            raise _error(f"global batch {want} over {self.data_ranks} data-parallel ranks is "
                         f"{want // self.data_ranks} rows per rank; the plan's micro-batch "
                         f"{self.micro_batch} x accumulation {self.grad_accumulation} is "
                         f"{per_rank}")

    def predicted(self, rank):
        """(peak_bytes, source): the plan's per-rank prediction for `rank`
        ('per_rank'), else its worst rank's / single process's ('peak')."""
        predicted = self.plan.get("predicted", {})
        entries = predicted.get("per_rank") or []
        for entry in entries:
            # An entry is one distinct rank ("rank") and how many ranks
            # hold the same ("ranks"): one entry of all ranks stands for each.
            if entry.get("rank") == rank or (len(entries) == 1 and
                                             entry.get("ranks") == self.nproc):
                return int(entry["peak_bytes"]), "per_rank"
        return int(predicted.get("peak_bytes", 0)), "peak"

    def predicted_host(self, rank):
        """The plan's host bytes for `rank` under state offload
        (per_rank's host_bytes), else None."""
        entries = self.plan.get("predicted", {}).get("per_rank") or []
        for entry in entries:
            if entry.get("rank") == rank or (len(entries) == 1 and
                                             entry.get("ranks") == self.nproc):
                return entry.get("host_bytes")
        return None

    def spec(self):
        """The JSON-able arguments a rank rebuilds this Job from."""
        return dict(engine=self.engine, nproc=self.nproc, plan_path=self.plan_path,
                    config_path=self.config_path, steps=self.steps,
                    grad_accumulation=self.grad_accumulation, global_batch=self.global_batch,
                    zero=self.zero, seed=self.seed, timeout_s=self.timeout_s)


def global_batch(step, rows, seq_len, vocab):
    """Step `step`'s token ids, (rows, seq_len) int64, the same in every
    process."""
    import torch

    g = torch.Generator().manual_seed(DATA_SEED + step)
    return torch.randint(0, vocab, (rows, seq_len), generator=g)


def rank_rows(data_rank, micro, micro_batch, grad_accumulation):
    """The rows of the global batch that data-parallel rank `data_rank`
    takes for its micro-batch `micro`: ranks take consecutive slices of
    micro_batch x grad_accumulation rows, micro-batches consecutive rows
    within them."""
    start = (data_rank * grad_accumulation + micro) * micro_batch
    return slice(start, start + micro_batch)


def build_model(job):
    """The Hugging Face causal LM of config.json, fp32, seeded, with the
    plan's attention and no KV cache."""
    import torch
    import transformers

    fields = {k: v for k, v in job.config.items() if k not in ("model_type", "architectures")}
    config = transformers.AutoConfig.for_model(job.config["model_type"], **fields)
    config._attn_implementation = job.attention
    torch.manual_seed(job.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.config.use_cache = False
    return model.train()
