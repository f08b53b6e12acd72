#include "parallel_flags.h"

#include <string>

namespace remat::cli {

std::vector<FlagSpec> ParallelFlags() {
  return {
      {"gpus", "N", "GPUs the job runs on: data ranks x --tp x --pp (default 1)"},
      {"ddp", "", "DistributedDataParallel: the model state replicated (the default on --gpus 2+)"},
      {"zero", "S", "DeepSpeed ZeRO stage 0, 1, 2 or 3 (1: Megatron's distributed optimizer)"},
      {"fsdp", "MODE",
       "PyTorch FSDP2 fully_shard: full_shard, shard_grad_op (reshard_after_forward False), "
       "hybrid_shard (HSDP), no_shard (DDP)"},
      {"shard-group", "N", "hybrid_shard: ranks one replica is sharded over (default 8)"},
      {"bucket-cap-mb", "X", "DDP's bucket_cap_mb (default 25)"},
      {"fsdp-no-sync", "",
       "FSDP2 under gradient accumulation: set_requires_gradient_sync(False) until the last "
       "micro-batch (unsharded gradients kept; default: a reduce-scatter every micro-batch)"},
      {"fsdp-units", "U",
       "FSDP2's fully_shard units besides the root: block (one per transformer block, the "
       "default, as torchtitan, accelerate and transformers wrap), segment (a recompute "
       "segment's blocks as one unit)"},
      {"zero3-persistence-threshold", "N",
       "ZeRO-3's stage3_param_persistence_threshold: parameters of at most N elements stay "
       "whole on every rank (default 100000, DeepSpeed's)"},
      {"offload-optimizer", "D",
       "DeepSpeed ZeRO-Offload (--zero 1-3): cpu keeps the fp32 master weights, moments and "
       "gradient partition on the host and steps there (offload_optimizer.device); none (default)"},
      {"fsdp-cpu-offload", "",
       "FSDP2's CPUOffloadPolicy: sharded parameters, gradients and optimizer state on the "
       "host, the optimizer stepped there"},
      {"tp", "N", "tensor-parallel degree (divides the attention and key/value heads)"},
      {"sp", "", "sequence parallelism over the tensor-parallel group"},
      {"pp", "N", "pipeline-parallel stages"},
      {"pp-schedule", "S", "pipeline schedule: 1f1b (default), interleaved"},
      {"virtual-stages", "N", "interleaved schedule: model chunks per pipeline rank"},
  };
}

Result<std::optional<Parallelism>> ParseParallelFlags(const Args& args) {
  bool any = false;
  for (const FlagSpec& f : ParallelFlags()) any = any || args.Has(f.name);
  if (!any) return std::optional<Parallelism>();
  Parallelism p;
  REMAT_ASSIGN_OR_RETURN(p.gpus, args.GetInt("gpus", 1, 1, 1 << 20));
  REMAT_ASSIGN_OR_RETURN(p.tensor, args.GetInt("tp", 1, 1, 1 << 12));
  REMAT_ASSIGN_OR_RETURN(p.pipeline, args.GetInt("pp", 1, 1, 1 << 12));
  REMAT_ASSIGN_OR_RETURN(p.virtual_stages, args.GetInt("virtual-stages", 1, 1, 1 << 12));
  p.sequence = args.Has("sp");
  const int data_flags = args.Has("ddp") + args.Has("zero") + args.Has("fsdp");
  if (data_flags > 1) {
    return Status::Invalid(
        "options --ddp, --zero and --fsdp each choose the data-parallel engine: give one");
  }
  if (args.Has("ddp")) p.data = DataParallel::kDdp;
  if (args.Has("zero")) {
    REMAT_ASSIGN_OR_RETURN(const int64_t stage, args.GetInt("zero", 0, 0, 3));
    static constexpr DataParallel kStages[] = {DataParallel::kZero0, DataParallel::kZero1,
                                               DataParallel::kZero2, DataParallel::kZero3};
    p.data = kStages[stage];
  }
  if (args.Has("fsdp")) {
    const std::string mode = args.Get("fsdp");
    if (mode == "full_shard") {
      p.data = DataParallel::kFsdp2;
    } else if (mode == "shard_grad_op") {
      p.data = DataParallel::kFsdp2;
      p.reshard_after_forward = false;
    } else if (mode == "hybrid_shard") {
      p.data = DataParallel::kHsdp;
    } else if (mode == "no_shard") {
      p.data = DataParallel::kDdp;
    } else {
      return Status::Invalid("option --fsdp: unknown mode '" + mode +
                             "'; accepted: full_shard, shard_grad_op, hybrid_shard, no_shard");
    }
  }
  if (p.data == DataParallel::kNone && p.gpus / (p.tensor * p.pipeline) > 1) {
    p.data = DataParallel::kDdp;
  }
  if (args.Has("shard-group")) {
    if (p.data != DataParallel::kHsdp) {
      return Status::Invalid("option --shard-group applies to --fsdp hybrid_shard only");
    }
    REMAT_ASSIGN_OR_RETURN(p.shard_group, args.GetInt("shard-group", 0, 1, 1 << 20));
  }
  if (args.Has("bucket-cap-mb")) {
    if (p.data != DataParallel::kDdp) {
      return Status::Invalid(
          "option --bucket-cap-mb is DDP's: it needs --ddp (or --gpus 2+ "
          "without --zero or --fsdp)");
    }
    REMAT_ASSIGN_OR_RETURN(p.bucket_cap_mb, args.GetDouble("bucket-cap-mb", 25, 1e-3, 1e6));
  }
  if (args.Has("fsdp-no-sync")) {
    if (p.data != DataParallel::kFsdp2 && p.data != DataParallel::kHsdp) {
      return Status::Invalid("option --fsdp-no-sync is FSDP2's: it needs --fsdp full_shard, "
                             "shard_grad_op or hybrid_shard");
    }
    p.fsdp_no_sync = true;
  }
  if (args.Has("fsdp-units")) {
    if (p.data != DataParallel::kFsdp2 && p.data != DataParallel::kHsdp) {
      return Status::Invalid("option --fsdp-units is FSDP2's: it needs --fsdp full_shard, "
                             "shard_grad_op or hybrid_shard");
    }
    Result<FsdpUnits> units = ParseFsdpUnits(args.Get("fsdp-units"));
    if (!units.ok()) return units.status().WithPrefix("--fsdp-units");
    p.fsdp_units = *units;
  }
  if (args.Has("zero3-persistence-threshold")) {
    if (p.data != DataParallel::kZero3) {
      return Status::Invalid("option --zero3-persistence-threshold is DeepSpeed ZeRO-3's: it "
                             "needs --zero 3");
    }
    REMAT_ASSIGN_OR_RETURN(p.persistence_threshold,
                           args.GetInt("zero3-persistence-threshold", 100000, 0, int64_t{1} << 50));
  }
  if (args.Has("offload-optimizer")) {
    const std::string device = args.Get("offload-optimizer");
    if (device != "cpu" && device != "none") {
      return Status::Invalid("option --offload-optimizer: unknown device '" + device +
                             "'; accepted: cpu, none (nvme is not modelled)");
    }
    if (device == "cpu") {
      if (p.data != DataParallel::kZero1 && p.data != DataParallel::kZero2 &&
          p.data != DataParallel::kZero3) {
        return Status::Invalid("option --offload-optimizer cpu is DeepSpeed ZeRO-Offload's: it "
                               "needs --zero 1, 2 or 3 (FSDP2: --fsdp-cpu-offload)");
      }
      p.offload = StateOffload::kOptimizer;
    }
  }
  if (args.Has("fsdp-cpu-offload")) {
    if (p.data != DataParallel::kFsdp2 && p.data != DataParallel::kHsdp) {
      return Status::Invalid("option --fsdp-cpu-offload is FSDP2's CPUOffloadPolicy: it needs "
                             "--fsdp full_shard, shard_grad_op or hybrid_shard (DeepSpeed: "
                             "--zero 1-3 --offload-optimizer cpu)");
    }
    p.offload = StateOffload::kFsdpCpu;
  }
  if (args.Has("pp-schedule")) {
    const std::string s = args.Get("pp-schedule");
    if (s == "1f1b") {
      p.schedule = PipelineSchedule::k1F1B;
    } else if (s == "interleaved") {
      p.schedule = PipelineSchedule::kInterleaved;
    } else {
      return Status::Invalid("option --pp-schedule: unknown schedule '" + s +
                             "'; accepted: 1f1b, interleaved");
    }
  }
  return std::optional<Parallelism>(p);
}

}  // namespace remat::cli
