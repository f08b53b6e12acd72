#include "remat/report/export.h"

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "remat/io/units.h"

namespace remat {
namespace {

using Json = nlohmann::ordered_json;

enum class Half { kNone, kBf16, kFp16 };

// The 16-bit type a precision computes in (none for fp32 or a profile).
Half HalfOf(const ReportContext& ctx) {
  if (!ctx.has_config) return Half::kNone;
  switch (ctx.config.precision) {
    case Precision::kBf16:
    case Precision::kAmpBf16:
    case Precision::kMixedBf16:
      return Half::kBf16;
    case Precision::kFp16:
    case Precision::kAmpFp16:
    case Precision::kMixedFp16:
      return Half::kFp16;
    case Precision::kFp32:
      break;
  }
  return Half::kNone;
}

// Whether the precision casts per matmul or keeps fp32 master weights: what
// HF's bf16/fp16 flags (torch.autocast) run; pure bf16/fp16 load the model
// in that dtype instead.
bool MixedPrecision(const ReportContext& ctx) {
  if (!ctx.has_config) return false;
  const Precision p = ctx.config.precision;
  return p == Precision::kAmpBf16 || p == Precision::kAmpFp16 || p == Precision::kMixedBf16 ||
         p == Precision::kMixedFp16;
}

// Examples per optimizer step over every data rank.
int64_t GlobalBatch(const Profile& profile, const ReportContext& ctx) {
  return profile.micro_batch * ctx.grad_accumulation * ctx.parallel.data_ranks();
}

bool Sharded(DataParallel d) {
  return d == DataParallel::kFsdp2 || d == DataParallel::kHsdp || d == DataParallel::kZero3;
}

// DeepSpeed's ZeRO stage for the data parallelism (FSDP2 shards as stage 3
// does; DDP replicates as stage 0).
int ZeroStage(const Parallelism& p) {
  switch (p.data) {
    case DataParallel::kZero1:
      return 1;
    case DataParallel::kZero2:
      return 2;
    case DataParallel::kZero3:
    case DataParallel::kFsdp2:
    case DataParallel::kHsdp:
      return 3;
    default:
      return 0;
  }
}

std::string Hf(const EnginePlan& e, const Profile& profile, const ReportContext& ctx) {
  Json j;
  if (profile.micro_batch > 0) j["per_device_train_batch_size"] = profile.micro_batch;
  j["gradient_accumulation_steps"] = ctx.grad_accumulation;
  const bool on = e.shape == EngineShape::kChunks || e.shape == EngineShape::kEveryNthFromFirst ||
                  e.shape == EngineShape::kEveryBlockOffloaded;
  j["gradient_checkpointing"] = on;
  if (on) j["gradient_checkpointing_kwargs"] = {{"use_reentrant", false}};
  // transformers (5.x) reads every_n_layers and offload from these kwargs
  // and passes the rest to torch.utils.checkpoint; offload runs each
  // checkpoint under torch.autograd.graph.save_on_cpu.
  if (e.shape == EngineShape::kEveryNthFromFirst) {
    j["gradient_checkpointing_kwargs"]["every_n_layers"] = e.n;
  }
  if (e.shape == EngineShape::kEveryBlockOffloaded) {
    j["gradient_checkpointing_kwargs"]["offload"] = true;
  }
  if (MixedPrecision(ctx)) j[HalfOf(ctx) == Half::kBf16 ? "bf16" : "fp16"] = true;
  // bitsandbytes' AdamW with 8-bit block-wise state, as --optimizer
  // adamw8bit plans it (docs/optimizers.md). transformers names no
  // torch.optim.Adafactor or Muon (its "adafactor" is its own, with fp32
  // state for 16-bit weights): those go to Trainer(optimizers=...).
  // transformers' names for bitsandbytes' paged AdamW and torchao's 8-bit
  // and 4-bit AdamW (its OptimizerNames); it has none for torchao's fp8.
  if (ctx.has_config) {
    switch (ctx.config.optimizer) {
      case Optimizer::kAdamW8bit:
        j["optim"] = "adamw_bnb_8bit";
        break;
      case Optimizer::kPagedAdamW8bit:
        j["optim"] = "paged_adamw_8bit";
        break;
      case Optimizer::kTorchaoAdamW8bit:
        j["optim"] = "adamw_torch_8bit";
        break;
      case Optimizer::kTorchaoAdamW4bit:
        j["optim"] = "adamw_torch_4bit";
        break;
      default:
        break;
    }
  }
  if (e.loss_chunks > 0) {
    // Liger-Kernel's fused linear cross-entropy alone: its other kernels
    // (RoPE, RMSNorm, SwiGLU/GeGLU, LayerNorm, cross-entropy) change what the
    // blocks keep, which the plan does not assume. Liger passes each model
    // type's patch the keys it takes.
    j["use_liger_kernel"] = true;
    j["liger_kernel_config"] = {{"fused_linear_cross_entropy", true},
                                {"cross_entropy", false},
                                {"rope", false},
                                {"rms_norm", false},
                                {"swiglu", false},
                                {"geglu", false},
                                {"layer_norm", false}};
  }
  return j.dump(2) + "\n";
}

std::string DeepSpeed(const EnginePlan& e, const Profile& profile, const ReportContext& ctx) {
  Json j;
  if (profile.micro_batch > 0) j["train_micro_batch_size_per_gpu"] = profile.micro_batch;
  j["gradient_accumulation_steps"] = ctx.grad_accumulation;
  if (ctx.parallel.distributed()) {
    if (profile.micro_batch > 0) j["train_batch_size"] = GlobalBatch(profile, ctx);
    const int stage = ZeroStage(ctx.parallel);
    j["zero_optimization"] = {{"stage", stage}};
    // The values the planner's per-rank model assumes (docs/distributed.md):
    // the reduce bucket of bucket_cap_mb MiB of fp32 elements, and ZeRO-3's
    // persistence threshold.
    if (stage >= 1) {
      const int64_t bucket = static_cast<int64_t>(ctx.parallel.bucket_cap_mb * 1048576.0) / 4;
      j["zero_optimization"]["reduce_bucket_size"] = bucket;
      j["zero_optimization"]["allgather_bucket_size"] = bucket;
    }
    if (stage == 3) {
      j["zero_optimization"]["stage3_param_persistence_threshold"] =
          ctx.parallel.persistence_threshold;
    }
    // State offload: ZeRO-Offload's optimizer state on the host; FSDP2's
    // CPUOffloadPolicy (exported as stage 3) also its parameters.
    if (ctx.parallel.offload != StateOffload::kNone && stage >= 1) {
      j["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}};
      if (ctx.parallel.offload == StateOffload::kFsdpCpu) {
        j["zero_optimization"]["offload_param"] = {{"device", "cpu"}};
      }
    }
  }
  const Half half = HalfOf(ctx);
  if (half != Half::kNone) j[half == Half::kBf16 ? "bf16" : "fp16"] = {{"enabled", true}};
  if (e.shape == EngineShape::kChunks) {
    const std::vector<std::vector<int>> passes = BlockLayersPerPass(profile);
    const int blocks = passes.empty() ? 0 : static_cast<int>(passes.front().size());
    j["activation_checkpointing"] = {{"partition_activations", false},
                                     {"cpu_checkpointing", false},
                                     {"contiguous_memory_optimization", false},
                                     {"number_checkpoints", (blocks + e.n - 1) / e.n},
                                     {"synchronize_checkpoint_boundary", false},
                                     {"profile", false}};
  }
  return j.dump(2) + "\n";
}

std::string Megatron(const EnginePlan& e, const Profile& profile, const ReportContext& ctx) {
  std::ostringstream out;
  if (profile.micro_batch > 0) {
    out << "--micro-batch-size " << profile.micro_batch << " --global-batch-size "
        << GlobalBatch(profile, ctx);
  }
  auto flag = [&out](const std::string& f) { out << (out.tellp() > 0 ? " " : "") << f; };
  const Parallelism& par = ctx.parallel;
  if (par.distributed()) {
    flag("--tensor-model-parallel-size " + std::to_string(par.tensor) +
         " --pipeline-model-parallel-size " + std::to_string(par.pipeline));
    if (par.virtual_stages > 1) {
      flag("--num-virtual-stages-per-pipeline-rank " + std::to_string(par.virtual_stages));
    }
    if (par.sequence) flag("--sequence-parallel");
    if (par.data == DataParallel::kZero1 || par.data == DataParallel::kZero2) {
      flag("--use-distributed-optimizer");
    }
    // HSDP's replicas have no Megatron flag: its FSDP shards over every data rank.
    if (par.data == DataParallel::kFsdp2 || par.data == DataParallel::kZero3) {
      flag("--use-torch-fsdp2");
    }
  }
  switch (e.shape) {
    case EngineShape::kChunks:
      flag("--recompute-granularity full --recompute-method uniform --recompute-num-layers " +
           std::to_string(e.n));
      break;
    case EngineShape::kFirstBlocks:
      flag("--recompute-granularity full --recompute-method block --recompute-num-layers " +
           std::to_string(e.n));
      break;
    case EngineShape::kSelectiveAttention:
      flag("--recompute-granularity selective --recompute-modules core_attn");
      break;
    default:
      break;
  }
  const Half half = HalfOf(ctx);
  if (half != Half::kNone) flag(half == Half::kBf16 ? "--bf16" : "--fp16");
  out << "\n";
  return out.str();
}

std::string Torchtitan(const EnginePlan& e, const Profile& profile, const ReportContext& ctx) {
  std::ostringstream out;
  out << "[training]\n";
  if (profile.micro_batch > 0) {
    out << "local_batch_size = " << profile.micro_batch << "\n"
        << "global_batch_size = " << GlobalBatch(profile, ctx) << "\n";
  }
  // torchtitan's mixed precision is bfloat16 (its default) or float32.
  if (ctx.has_config && HalfOf(ctx) != Half::kFp16) {
    out << "mixed_precision_param = \"" << (HalfOf(ctx) == Half::kBf16 ? "bfloat16" : "float32")
        << "\"\n";
  }
  // --fsdp-cpu-offload: torchtitan applies CPUOffloadPolicy to every
  // fully_shard unit.
  if (ctx.parallel.offload == StateOffload::kFsdpCpu) out << "enable_cpu_offload = true\n";
  const Parallelism& par = ctx.parallel;
  if (par.distributed()) {
    // FSDP shards over data_parallel_shard_degree ranks and replicates over
    // data_parallel_replicate_degree (HSDP: both; DDP and ZeRO-0..2, which
    // torchtitan runs as replicas: replicate only).
    const int64_t shard = Sharded(par.data) ? par.shard_ranks() : 1;
    out << "\n[parallelism]\n"
        << "data_parallel_replicate_degree = " << par.data_ranks() / shard << "\n"
        << "data_parallel_shard_degree = " << shard << "\n"
        << "tensor_parallel_degree = " << par.tensor << "\n"
        << "pipeline_parallel_degree = " << par.pipeline << "\n";
    if (Sharded(par.data)) {
      out << "fsdp_reshard_after_forward = \"" << (par.reshard_after_forward ? "default" : "never")
          << "\"\n";
    }
    if (par.pipeline > 1) {
      out << "pipeline_parallel_schedule = \""
          << (par.schedule == PipelineSchedule::kInterleaved ? "Interleaved1F1B" : "1F1B")
          << "\"\n"
          << "pipeline_parallel_microbatch_size = " << profile.micro_batch << "\n";
    }
  }
  out << "\n[activation_checkpoint]\n";
  switch (e.shape) {
    case EngineShape::kChunks:
      out << "mode = \"full\"\n";
      break;
    case EngineShape::kEveryNth:
      out << "mode = \"selective\"\nselective_ac_option = \"" << e.n << "\"\n";
      break;
    default:
      out << "mode = \"none\"\n";
      break;
  }
  return out.str();
}

// The checkpointed block indices (one pass) when every other layer is kept
// and no block recomputes anything else: a plan checkpoint_wrapper carries.
std::vector<int> CheckpointedBlockList(const Plan& plan, const Profile& profile) {
  const std::vector<std::vector<int>> passes = BlockLayersPerPass(profile);
  if (passes.empty()) return {};
  std::set<int> blocks;
  for (const std::vector<int>& pass : passes) blocks.insert(pass.begin(), pass.end());
  std::vector<int> list;
  for (int i = 0; i < static_cast<int>(plan.decisions.size()); ++i) {
    const LayerDecision d = plan.decisions[i];
    if (d == LayerDecision::kKeep) continue;
    if (d != LayerDecision::kCheckpoint || !blocks.count(i)) return {};
  }
  const std::vector<int>& first = passes.front();
  for (int b = 0; b < static_cast<int>(first.size()); ++b) {
    if (plan.decisions[first[b]] == LayerDecision::kCheckpoint) list.push_back(b);
  }
  return list;
}

// How the model is wrapped for its data ranks, after the plan is applied.
void DataParallelSnippet(std::ostringstream& out, const Parallelism& p) {
  const std::string launch = "torchrun --nproc-per-node " + std::to_string(p.gpus);
  if (p.data == DataParallel::kFsdp2 || p.data == DataParallel::kHsdp) {
    // --fsdp-cpu-offload: the shards, their gradients and the optimizer
    // state on the host (the optimizer then steps on the CPU).
    const std::string offload =
        p.offload == StateOffload::kFsdpCpu ? ", offload_policy=CPUOffloadPolicy()" : "";
    out << "\n# FSDP2 on the " << p.data_ranks() << " data ranks (" << launch
        << "): each block, then the root.\n"
        << "from torch.distributed.device_mesh import init_device_mesh\n"
        << "from torch.distributed.fsdp import "
        << (p.offload == StateOffload::kFsdpCpu ? "CPUOffloadPolicy, fully_shard\n"
                                                 : "fully_shard\n");
    if (p.data == DataParallel::kHsdp) {
      out << "mesh = init_device_mesh(\"cuda\", (" << p.data_ranks() / p.shard_ranks() << ", "
          << p.shard_ranks() << "), mesh_dim_names=(\"replicate\", \"shard\"))\n";
    } else {
      out << "mesh = init_device_mesh(\"cuda\", (" << p.data_ranks() << ",))\n";
    }
    out << "for block in model.model.layers:  # GPT-2: model.transformer.h\n"
        << "    fully_shard(block, mesh=mesh, reshard_after_forward="
        << (p.reshard_after_forward ? "True" : "False") << offload << ")\n"
        << "fully_shard(model, mesh=mesh" << offload << ")\n";
  } else if (p.data == DataParallel::kDdp) {
    out << "\n# DDP on the " << p.data_ranks() << " data ranks (" << launch << ").\n"
        << "from torch.nn.parallel import DistributedDataParallel\n"
        << "model = DistributedDataParallel(model, bucket_cap_mb=" << p.bucket_cap_mb << ")\n";
  }
}

std::string PyTorch(const EnginePlan& e, const Profile& profile, const ReportContext& ctx) {
  std::ostringstream out;
  out << "# The plan: save it with -o plan.json on the same command line.\n"
      << "import remat\n"
      << "remat.apply(model, \"plan.json\")\n";
  if (ctx.parallel.distributed()) DataParallelSnippet(out, ctx.parallel);
  const std::vector<int> list = CheckpointedBlockList(e.plan, profile);
  if (list.empty()) return out.str();
  out << "\n# Or, without remat: the same blocks checkpointed by PyTorch's wrapper.\n"
      << "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (\n"
      << "    apply_activation_checkpointing)\n"
      << "blocks = model.model.layers  # the model's transformer blocks, in order (GPT-2: "
         "model.transformer.h)\n"
      << "checkpointed = {id(blocks[i]) for i in (";
  for (size_t i = 0; i < list.size(); ++i) out << (i ? ", " : "") << list[i];
  out << (list.size() == 1 ? ",)}\n" : ")}\n")
      << "apply_activation_checkpointing(model, check_fn=lambda m: id(m) in checkpointed)\n";
  return out.str();
}

std::string Describe(const Plan& p) {
  std::string s = ToString(p.strategy);
  if (!p.parameter.empty()) s += " (" + p.parameter + ")";
  return s;
}

std::string Prediction(const Plan& p) {
  std::string s = "predicted " + FormatBytes(p.memory.total_bytes);
  if (p.budget_bytes > 0) {
    s += p.fits ? " (fits " : " (does not fit ";
    s += FormatBytes(p.budget_bytes) + ")";
  }
  return s + ", " + FormatMillis(p.predicted.step_ms) + " per step";
}

const char* Switch(Engine engine) {
  switch (engine) {
    case Engine::kHf:
      return "hf's gradient_checkpointing (none, every block, every n-th block from the first, "
             "every block offloaded with in-line copies)";
    case Engine::kDeepspeed:
      return "deepspeed's activation checkpointing (chunks of blocks)";
    case Engine::kMegatron:
      return "megatron's --recompute flags (uniform, block, selective core_attn)";
    case Engine::kTorchtitan:
      return "torchtitan's [activation_checkpoint] (none, full, every n-th block)";
    case Engine::kPytorch:
      break;
  }
  return "pytorch";
}

}  // namespace

std::string RenderExport(const EnginePlan& e, const Profile& profile, const ReportContext& ctx) {
  switch (e.engine) {
    case Engine::kHf:
      return Hf(e, profile, ctx);
    case Engine::kDeepspeed:
      return DeepSpeed(e, profile, ctx);
    case Engine::kMegatron:
      return Megatron(e, profile, ctx);
    case Engine::kTorchtitan:
      return Torchtitan(e, profile, ctx);
    case Engine::kPytorch:
      break;
  }
  return PyTorch(e, profile, ctx);
}

std::string ExportNote(const EnginePlan& e, const Plan& asked) {
  auto loss = [](int64_t chunks) {
    return chunks > 0 ? ", loss in " + std::to_string(chunks) + " chunks" : std::string();
  };
  // The switch that chunks the loss in the engine's configuration.
  const std::string runs_loss =
      e.loss_chunks > 0
          ? loss(e.loss_chunks) + (e.engine == Engine::kHf
                                       ? " (Liger-Kernel's fused linear cross-entropy)"
                                       : std::string(" (remat.apply)"))
          : std::string(e.asked_loss_chunks > 0 ? ", the whole loss" : "");
  if (e.exact) {
    return std::string(ToString(e.engine)) + " runs the plan exactly: " + Describe(e.plan) +
           runs_loss + ", " + Prediction(e.plan);
  }
  std::string why = std::string(Switch(e.engine)) + " cannot express " + Describe(asked);
  if (e.loss_chunks != e.asked_loss_chunks) {
    std::string what;
    if (e.loss_chunks > 0) {
      what = " chunks the loss as Liger-Kernel does, in " + std::to_string(e.loss_chunks) +
             " chunks";
    } else if (e.engine == Engine::kHf) {
      what = "'s configuration has no chunked loss for this model (Liger-Kernel patches the "
             "llama family)";
    } else {
      what = "'s configuration has no chunked loss";
    }
    why = std::string(ToString(e.engine)) + what + ": it cannot express " + Describe(asked) +
          loss(e.asked_loss_chunks);
  }
  return why + "; exporting the closest plan it can, " + Describe(e.plan) + runs_loss + ", " +
         Prediction(e.plan) + " (remat.apply(model, plan) applies " + Describe(asked) +
         loss(e.asked_loss_chunks) + " exactly)";
}

}  // namespace remat
