// The parallel settings checked against a model, and their names.
#include <algorithm>

#include "remat/model/parallel.h"

namespace remat {

int64_t Parallelism::shard_ranks() const {
  switch (data) {
    case DataParallel::kZero1:
    case DataParallel::kZero2:
    case DataParallel::kZero3:
    case DataParallel::kFsdp2:
      return data_ranks();
    case DataParallel::kHsdp:
      return shard_group > 0 ? shard_group : std::min<int64_t>(data_ranks(), 8);
    case DataParallel::kNone:
    case DataParallel::kDdp:
    case DataParallel::kZero0:
      return 1;
  }
  return 1;
}

const char* ToString(DataParallel d) {
  switch (d) {
    case DataParallel::kNone:
      return "none";
    case DataParallel::kDdp:
      return "ddp";
    case DataParallel::kZero0:
      return "zero0";
    case DataParallel::kZero1:
      return "zero1";
    case DataParallel::kZero2:
      return "zero2";
    case DataParallel::kZero3:
      return "zero3";
    case DataParallel::kFsdp2:
      return "fsdp2";
    case DataParallel::kHsdp:
      return "hsdp";
  }
  return "none";
}

const char* ToString(PipelineSchedule s) {
  return s == PipelineSchedule::kInterleaved ? "interleaved" : "1f1b";
}

const char* ToString(FsdpUnits u) { return u == FsdpUnits::kSegment ? "segment" : "block"; }

Result<FsdpUnits> ParseFsdpUnits(std::string_view name) {
  if (name == "block") return FsdpUnits::kBlock;
  if (name == "segment") return FsdpUnits::kSegment;
  return Status::Invalid("unknown FSDP2 units '" + std::string(name) +
                         "'; accepted: block, segment");
}

const char* ToString(StateOffload o) {
  switch (o) {
    case StateOffload::kOptimizer:
      return "optimizer";
    case StateOffload::kFsdpCpu:
      return "fsdp_cpu";
    case StateOffload::kNone:
      break;
  }
  return "none";
}

Result<StateOffload> ParseStateOffload(std::string_view name) {
  for (StateOffload o : {StateOffload::kNone, StateOffload::kOptimizer, StateOffload::kFsdpCpu}) {
    if (name == ToString(o)) return o;
  }
  return Status::Invalid("unknown state offload '" + std::string(name) +
                         "'; accepted: none, optimizer, fsdp_cpu");
}

Result<DataParallel> ParseDataParallel(std::string_view name) {
  for (DataParallel d :
       {DataParallel::kNone, DataParallel::kDdp, DataParallel::kZero0, DataParallel::kZero1,
        DataParallel::kZero2, DataParallel::kZero3, DataParallel::kFsdp2, DataParallel::kHsdp}) {
    if (name == ToString(d)) return d;
  }
  return Status::Invalid("unknown data parallelism '" + std::string(name) +
                         "'; accepted: none, ddp, zero0, zero1, zero2, zero3, fsdp2, hsdp");
}

Result<PipelineSchedule> ParsePipelineSchedule(std::string_view name) {
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  if (name == "interleaved") return PipelineSchedule::kInterleaved;
  return Status::Invalid("unknown pipeline schedule '" + std::string(name) +
                         "'; accepted: 1f1b, interleaved");
}

Status ValidateParallelism(const Parallelism& p, const ModelConfig& config,
                           const std::string& source) {
  const std::string where = source + ": ";
  if (p.gpus < 1 || p.tensor < 1 || p.pipeline < 1 || p.virtual_stages < 1) {
    return Status::Invalid(where + "gpus, tensor, pipeline and virtual stages must be at least 1");
  }
  if (p.gpus % (p.tensor * p.pipeline) != 0) {
    return Status::Invalid(
        where + "--gpus " + std::to_string(p.gpus) + " is not a multiple of --tp x --pp = " +
        std::to_string(p.tensor * p.pipeline) + " (gpus = data ranks x tensor x pipeline)");
  }
  const ModelConfig c = WithDefaults(config);
  if (c.heads % p.tensor != 0 || c.kv_heads % p.tensor != 0) {
    return Status::Invalid(where + "--tp " + std::to_string(p.tensor) +
                           " must divide the attention heads (" + std::to_string(c.heads) +
                           ") and the key/value heads (" + std::to_string(c.kv_heads) +
                           "): each tensor-parallel rank holds whole heads");
  }
  if (p.sequence && p.tensor < 2) {
    return Status::Invalid(where +
                           "--sp splits activations over the tensor-parallel group: it needs "
                           "--tp 2 or more");
  }
  const int64_t chunks = p.pipeline * p.virtual_stages;
  if (chunks > c.layers) {
    return Status::Invalid(
        where + "--pp " + std::to_string(p.pipeline) +
        (p.virtual_stages > 1 ? " x --virtual-stages " + std::to_string(p.virtual_stages)
                              : std::string()) +
        " is more pipeline stages than the model's " + std::to_string(c.layers) + " blocks");
  }
  if (p.virtual_stages > 1 && p.schedule != PipelineSchedule::kInterleaved) {
    return Status::Invalid(where + "--virtual-stages needs --pp-schedule interleaved");
  }
  if (p.schedule == PipelineSchedule::kInterleaved && p.pipeline < 2) {
    return Status::Invalid(where + "--pp-schedule interleaved needs --pp 2 or more");
  }
  if (p.data == DataParallel::kHsdp) {
    const int64_t group = p.shard_ranks();
    if (group < 1 || p.data_ranks() % group != 0) {
      return Status::Invalid(where + "--shard-group " + std::to_string(group) +
                             " must divide the data ranks (" + std::to_string(p.data_ranks()) +
                             " = gpus / (tp x pp))");
    }
  } else if (p.shard_group != 0) {
    return Status::Invalid(where + "--shard-group applies to --fsdp hybrid_shard only");
  }
  const bool zero = p.data == DataParallel::kZero1 || p.data == DataParallel::kZero2 ||
                    p.data == DataParallel::kZero3;
  if (p.offload == StateOffload::kOptimizer && !zero) {
    return Status::Invalid(where + "--offload-optimizer cpu is DeepSpeed ZeRO-Offload's: it needs "
                           "--zero 1, 2 or 3, got data parallelism " + ToString(p.data));
  }
  const bool fsdp = p.data == DataParallel::kFsdp2 || p.data == DataParallel::kHsdp;
  if (p.offload == StateOffload::kFsdpCpu && !fsdp) {
    return Status::Invalid(where + "--fsdp-cpu-offload is FSDP2's CPUOffloadPolicy: it needs "
                           "--fsdp full_shard, shard_grad_op or hybrid_shard, got data "
                           "parallelism " + std::string(ToString(p.data)));
  }
  return Status::Ok();
}

BlockRange PipelineBlocks(int64_t blocks, int64_t stages, int64_t stage) {
  const int64_t base = blocks / stages, extra = blocks % stages;
  BlockRange r;
  r.first = stage * base + std::min(stage, extra);
  r.end = r.first + base + (stage < extra ? 1 : 0);
  return r;
}

}  // namespace remat
