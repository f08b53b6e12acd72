#include "remat/planning/job.h"

namespace remat {
namespace {

Status ApplyOverrides(const JobOverrides& o, PlannerInput::Kind kind, ModelConfig* c,
                      const std::string& source) {
  if (o.micro_batch) c->micro_batch = *o.micro_batch;
  if (o.seq_len) {
    c->seq_len = *o.seq_len;
    if (c->architecture != Architecture::kLlama && c->max_position < c->seq_len) {
      c->max_position = c->seq_len;
    }
  }
  if (o.precision) c->precision = *o.precision;
  if (o.attention) c->attention = *o.attention;
  if (o.gradients) c->gradients = *o.gradients;
  if (o.optimizer) c->optimizer = *o.optimizer;
  if (o.grad_dtype) c->grad_dtype = *o.grad_dtype;
  if (o.dropout) c->dropout = *o.dropout;
  if (o.head) {
    c->head = *o.head;
    // What ParseHfConfig gives an encoder whose "remat" block names the
    // head: AutoModel's pooler with the pooling head (DistilBERT, without
    // token types, has none).
    if (kind == PlannerInput::Kind::kHfConfig) {
      c->pooler =
          c->architecture == Architecture::kBert && c->type_vocab != 0 && *o.head == Head::kPooling;
    }
  }
  if (o.loss) c->loss = *o.loss;
  if (o.texts_per_example) c->texts_per_example = *o.texts_per_example;
  if (o.merge_columns) c->merge_columns = *o.merge_columns;
  if (o.loss_chunks) c->loss_chunks = *o.loss_chunks;
  const Head head = WithDefaults(*c).head;
  if (o.pooling) {
    if (head != Head::kPooling) {
      return Status::Invalid(source + ": pooling: only the pooling head pools (head is " +
                             ToString(head) + ")");
    }
    c->pooling = *o.pooling;
  }
  if (o.num_labels) {
    if (head != Head::kClassification) {
      return Status::Invalid(source + ": num_labels: only the classification head has labels " +
                             "(head is " + ToString(head) + ")");
    }
    c->num_labels = *o.num_labels;
  }
  if (o.grad_accumulation) c->grad_accumulation = *o.grad_accumulation;
  if (o.lora_rank) {
    c->lora_rank = *o.lora_rank;
    if (*o.lora_rank == 0) {  // full fine-tuning: the file's other LoRA keys go too
      const ModelConfig plain;
      c->lora_targets = plain.lora_targets;
      c->lora_dropout = plain.lora_dropout;
      c->lora_dtype = plain.lora_dtype;
      c->quantization = plain.quantization;
      c->double_quant = plain.double_quant;
    }
  }
  if (o.lora_targets) c->lora_targets = *o.lora_targets;
  if (o.lora_dropout) c->lora_dropout = *o.lora_dropout;
  if (o.quantization) c->quantization = *o.quantization;
  return ValidateModelConfig(*c, source);
}

// The ranks of a distributed job from its profile, and the profile of the
// rank with the most model state as the job's; from `made`, the layout of
// the job's model, where given (kept with the job), else from `layout`.
Status ApplyParallel(Job* job, const RankLayout* layout = nullptr,
                     std::shared_ptr<const RankLayout> made = nullptr) {
  Parallelism p = job->analytic.parallel;
  if (!p.distributed()) return Status::Ok();
  // CPU ranks reduce over Gloo (python -m remat train's backend there).
  p.gloo = job->analytic.device.name == "cpu";
  if (job->has_config()) {
    // The job's profile, replaced below, shared by the ranks that hold it
    // whole.
    auto whole = std::make_shared<const Profile>(std::move(job->profile));
    // The layout kept with the job where it makes it (where it cannot,
    // RankMemories fails as it would have).
    std::shared_ptr<const RankLayout> built = std::move(made);
    if (built == nullptr && layout == nullptr && ValidateParallelism(p, job->model, job->model.name).ok()) {
      Result<std::shared_ptr<const RankLayout>> made = BuildRankLayout(job->model);
      if (made.ok()) built = *std::move(made);
    }
    Result<std::vector<RankMemory>> ranks =
        RankMemories(job->model, whole, p, built != nullptr ? built.get() : layout);
    if (!ranks.ok()) {
      job->profile = *whole;
      return ranks.status().WithPrefix(job->path);
    }
    job->ranks = std::move(*ranks);
    job->layout = std::move(built);
  } else {
    job->ranks = {ProfileRankMemory(job->profile, p)};
  }
  const RankMemory* most = &job->ranks.front();
  for (const RankMemory& r : job->ranks) {
    if (r.profile.model_state_bytes() > most->profile.model_state_bytes()) most = &r;
  }
  job->profile = most->profile;
  return Status::Ok();
}

// Why the parallel settings cannot apply to a profile: it is one rank
// already, so tensor, sequence and pipeline parallelism would change its
// measured sizes; data parallelism divides its model state, and the
// engines that gather weights per block need each layer's gradient bytes
// to tell the blocks' share.
Status CheckProfileParallel(const Parallelism& p, const Profile& profile,
                            const std::string& path) {
  if (p.tensor > 1 || p.sequence || p.pipeline > 1) {
    return Status::Invalid(path +
                           " is a profile (one rank's measured sizes): --tp, --sp and --pp "
                           "change its activations; profile the rank you plan for, or plan "
                           "the model.json / config.json");
  }
  const bool per_block = p.data == DataParallel::kZero3 || p.data == DataParallel::kFsdp2 ||
                         p.data == DataParallel::kHsdp;
  int64_t created = 0;
  for (const LayerProfile& l : profile.layers) created += l.gradient_bytes;
  if (per_block && created == 0 && p.shard_ranks() > 1) {
    return Status::Invalid(path + ": --" +
                           (p.data == DataParallel::kZero3 ? std::string("zero 3")
                                                           : std::string("fsdp")) +
                           " gathers weights block by block, and this profile's layers give "
                           "no gradient_bytes to size a block by; use --ddp or --zero 0..2, "
                           "or plan the model.json / config.json");
  }
  return Status::Ok();
}

}  // namespace

Result<Job> MakeJob(PlannerInput input, const JobOverrides& overrides) {
  Job job;
  job.path = std::move(input.path);
  job.kind = input.kind;
  const std::string& path = job.path;
  REMAT_ASSIGN_OR_RETURN(job.analytic.device, LookupDevice(overrides.device.value_or("a100")));
  if (overrides.tflops) {
    if (!(*overrides.tflops > 0)) return Status::Invalid("achieved TFLOP/s must be above 0");
    job.analytic.tflops = *overrides.tflops;
  }
  if (overrides.grad_accumulation && *overrides.grad_accumulation < 1) {
    return Status::Invalid("grad_accumulation must be at least 1, got " +
                           std::to_string(*overrides.grad_accumulation));
  }
  if (job.kind == PlannerInput::Kind::kProfile) {
    if (overrides.any()) {
      return Status::Invalid(path +
                             " is a profile (measured or hand-written sizes and times): "
                             "the micro-batch, sequence length, precision, head, loss and "
                             "the other job fields, device and TFLOP/s can be changed for "
                             "model.json and config.json inputs only");
    }
    job.profile = std::move(input.profile);
    if (overrides.grad_accumulation) job.profile.grad_accumulation = *overrides.grad_accumulation;
    if (overrides.parallel) {
      REMAT_RETURN_IF_ERROR(CheckProfileParallel(*overrides.parallel, job.profile, path));
      job.analytic.parallel = *overrides.parallel;
      REMAT_RETURN_IF_ERROR(ApplyParallel(&job));
    }
    return job;
  }
  job.model = std::move(input.config);
  job.default_seq_len = input.default_seq_len && !overrides.seq_len;
  REMAT_RETURN_IF_ERROR(ApplyOverrides(overrides, job.kind, &job.model, path));
  if (overrides.parallel) {
    REMAT_RETURN_IF_ERROR(ValidateParallelism(*overrides.parallel, job.model, path));
    job.analytic.parallel = *overrides.parallel;
  }
  // A distributed job's ranks read the model's graph: the profile's
  // (RankLayoutOfChain), not built again.
  REMAT_ASSIGN_OR_RETURN(std::shared_ptr<const AnalyticChain> chain,
                         BuildAnalyticChain(job.model, job.analytic));
  REMAT_ASSIGN_OR_RETURN(job.profile, AnalyticProfile(job.model, job.analytic, *chain));
  std::shared_ptr<const RankLayout> layout;
  if (job.analytic.parallel.distributed()) layout = RankLayoutOfChain(*chain);
  chain.reset();
  REMAT_RETURN_IF_ERROR(ApplyParallel(&job, nullptr, std::move(layout)));
  return job;
}

Result<Job> LoadJob(const std::string& path, const JobOverrides& overrides) {
  REMAT_ASSIGN_OR_RETURN(PlannerInput input, LoadPlannerInput(path));
  return MakeJob(std::move(input), overrides);
}

Job WithoutProfile(const Job& job) {
  Job out;
  out.path = job.path;
  out.kind = job.kind;
  out.model = job.model;
  out.analytic = job.analytic;
  out.default_seq_len = job.default_seq_len;
  out.profile.host_link = job.profile.host_link;
  return out;
}

Result<Job> WithParallel(const Job& job, const Parallelism& p) {
  if (!job.has_config()) {
    Job other = job;
    other.analytic.parallel = p;
    other.ranks.clear();
    if (!job.ranks.empty()) {
      return Status::Invalid(job.path + ": the profile's model state is divided already");
    }
    REMAT_RETURN_IF_ERROR(CheckProfileParallel(p, job.profile, job.path));
    REMAT_RETURN_IF_ERROR(ApplyParallel(&other));
    return other;
  }
  REMAT_RETURN_IF_ERROR(ValidateParallelism(p, job.model, job.path));
  REMAT_ASSIGN_OR_RETURN(Profile model_profile, ModelProfile(job, p));
  return WithParallel(job, p, model_profile);
}

Result<Profile> ModelProfile(const Job& job, const Parallelism& p) {
  if (!job.has_config()) {
    return Status::Invalid(job.path + " is a profile: it has no model to profile");
  }
  AnalyticOptions options = job.analytic;
  options.parallel = p;
  return AnalyticProfile(job.model, options);
}

Result<Job> WithParallel(const Job& job, const Parallelism& p, const Profile& model_profile,
                         const RankLayout* layout) {
  if (!job.has_config()) {
    return Status::Invalid(job.path + " is a profile: it has no model to profile");
  }
  Job other = WithoutProfile(job);
  other.analytic.parallel = p;
  REMAT_RETURN_IF_ERROR(ValidateParallelism(p, other.model, job.path));
  other.profile = model_profile;
  other.profile.host_link = job.profile.host_link;
  REMAT_RETURN_IF_ERROR(ApplyParallel(&other, layout));
  for (RankMemory& r : other.ranks) r.profile.host_link = job.profile.host_link;
  return other;
}

Result<Job> WithMicroBatch(const Job& job, int64_t micro_batch, int64_t grad_accumulation,
                           const RankLayout* layout) {
  if (!job.has_config()) {
    return Status::Invalid(job.path + " is a profile: its micro-batch is measured");
  }
  Job other = WithoutProfile(job);
  other.model.micro_batch = micro_batch;
  if (grad_accumulation > 0) other.model.grad_accumulation = grad_accumulation;
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(other.model, job.path));
  REMAT_ASSIGN_OR_RETURN(other.profile, AnalyticProfile(other.model, other.analytic));
  REMAT_RETURN_IF_ERROR(ApplyParallel(&other, layout));
  other.profile.host_link = job.profile.host_link;  // --host-link, not the model's
  for (RankMemory& r : other.ranks) r.profile.host_link = job.profile.host_link;
  return other;
}

}  // namespace remat
