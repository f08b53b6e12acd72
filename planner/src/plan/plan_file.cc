// plan.json read back: the plan a file holds, as `planner train` runs it.
#include "remat/plan/plan_file.h"

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "remat/model/precision.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::JsonObjectReader;
using internal::ParseJson;

PlannedJob PlannedJobOf(const ModelConfig& config) {
  const ModelConfig c = WithDefaults(config);
  PlannedJob j;
  j.precision = c.precision;
  j.attention = c.attention;
  j.head = c.head;
  if (c.head == Head::kPooling) j.pooling = c.pooling;
  j.loss = c.loss;
  j.texts_per_example = c.texts_per_example;
  if (c.head == Head::kClassification) j.num_labels = c.num_labels;
  j.merge_columns = c.merge_columns;
  if (c.loss_chunks > 0) j.loss_chunks = c.loss_chunks;
  j.optimizer = c.optimizer;
  // The dtype GradientBytes resolves: fp32, or the precision's 16-bit type.
  const bool fp16 = c.precision == Precision::kFp16 || c.precision == Precision::kMixedFp16 ||
                    c.precision == Precision::kAmpFp16;
  j.grad_dtype = GradientBytes(c.precision, c.grad_dtype) == 4 ? GradDtype::kFp32
                 : fp16                                        ? GradDtype::kFp16
                                                               : GradDtype::kBf16;
  j.gradients = GradientsOf(c);
  j.dropout = c.dropout;
  j.lora_rank = c.lora_rank;
  if (c.lora_rank > 0) j.lora_targets = c.lora_targets;
  if (c.lora_rank > 0) j.lora_dropout = c.lora_dropout;
  j.quantization = c.quantization;
  return j;
}

namespace {

// `key` of `r`'s object, when present, read by `parse` (a model.json name
// parser) into `*out`; the error names the field and what is accepted.
template <typename E>
Status JobName(const JsonObjectReader& r, const char* key, Result<E> (*parse)(std::string_view),
               std::optional<E>* out) {
  if (!r.Has(key)) return Status::Ok();
  std::string name;
  REMAT_RETURN_IF_ERROR(r.String(key, &name, false));
  Result<E> v = parse(name);
  if (!v.ok()) return r.Error(key, v.status().message());
  *out = *v;
  return Status::Ok();
}

Status JobInt(const JsonObjectReader& r, const char* key, int64_t min, int64_t max,
              std::optional<int64_t>* out) {
  if (!r.Has(key)) return Status::Ok();
  int64_t v = 0;
  REMAT_RETURN_IF_ERROR(r.Int(key, &v, false, min, max));
  *out = v;
  return Status::Ok();
}

// plan.json's job.parallel object (Parallelism).
Result<Parallelism> ParseParallel(const nlohmann::json& object, const std::string& where) {
  if (!object.is_object()) {
    return Status::Invalid(where + ": expected an object, got " + DescribeJsonValue(object));
  }
  JsonObjectReader r(object, where);
  REMAT_RETURN_IF_ERROR(r.NoUnknownKeys({"gpus", "data", "data_ranks", "shard_ranks", "tensor",
                                         "sequence", "pipeline", "schedule", "virtual_stages",
                                         "bucket_cap_mb", "reshard_after_forward",
                                         "shard_group", "persistence_threshold",
                                         "fsdp_no_sync", "fsdp_units", "state_offload"}));
  Parallelism p;
  REMAT_RETURN_IF_ERROR(r.Int("gpus", &p.gpus, true, 1, 1 << 20));
  std::optional<DataParallel> data;
  REMAT_RETURN_IF_ERROR(JobName(r, "data", ParseDataParallel, &data));
  if (data) p.data = *data;
  REMAT_RETURN_IF_ERROR(r.Int("tensor", &p.tensor, false, 1, 1 << 12));
  REMAT_RETURN_IF_ERROR(r.Bool("sequence", &p.sequence, false));
  REMAT_RETURN_IF_ERROR(r.Int("pipeline", &p.pipeline, false, 1, 1 << 12));
  std::optional<PipelineSchedule> schedule;
  REMAT_RETURN_IF_ERROR(JobName(r, "schedule", ParsePipelineSchedule, &schedule));
  if (schedule) p.schedule = *schedule;
  REMAT_RETURN_IF_ERROR(r.Int("virtual_stages", &p.virtual_stages, false, 1, 1 << 12));
  REMAT_RETURN_IF_ERROR(r.Double("bucket_cap_mb", &p.bucket_cap_mb, false, 1e-3, 1e6));
  REMAT_RETURN_IF_ERROR(r.Bool("reshard_after_forward", &p.reshard_after_forward, false));
  REMAT_RETURN_IF_ERROR(r.Int("shard_group", &p.shard_group, false, 0, 1 << 20));
  REMAT_RETURN_IF_ERROR(
      r.Int("persistence_threshold", &p.persistence_threshold, false, 0, int64_t{1} << 50));
  REMAT_RETURN_IF_ERROR(r.Bool("fsdp_no_sync", &p.fsdp_no_sync, false));
  std::optional<FsdpUnits> units;
  REMAT_RETURN_IF_ERROR(JobName(r, "fsdp_units", ParseFsdpUnits, &units));
  if (units) p.fsdp_units = *units;
  std::optional<StateOffload> offload;
  REMAT_RETURN_IF_ERROR(JobName(r, "state_offload", ParseStateOffload, &offload));
  if (offload) p.offload = *offload;
  if (p.gpus % (p.tensor * p.pipeline) != 0) {
    return Status::Invalid(where + ": gpus " + std::to_string(p.gpus) +
                           " is not a multiple of tensor x pipeline");
  }
  return p;
}

// plan.json's "job" object (PlannedJob).
Result<PlannedJob> ParsePlannedJob(const nlohmann::json& object, const std::string& where) {
  if (!object.is_object()) {
    return Status::Invalid(where + ": expected an object, got " + DescribeJsonValue(object));
  }
  JsonObjectReader r(object, where);
  REMAT_RETURN_IF_ERROR(r.NoUnknownKeys(
      {"precision", "attention", "head", "pooling", "loss", "texts_per_example", "num_labels",
       "merge_columns", "loss_chunks", "optimizer", "grad_dtype", "gradients", "dropout",
       "lora_rank", "lora_targets", "lora_dropout", "quantization", "alloc_conf", "parallel"}));
  PlannedJob j;
  REMAT_RETURN_IF_ERROR(JobName(r, "precision", ParsePrecision, &j.precision));
  REMAT_RETURN_IF_ERROR(JobName(r, "attention", ParseAttention, &j.attention));
  REMAT_RETURN_IF_ERROR(JobName(r, "head", ParseHead, &j.head));
  REMAT_RETURN_IF_ERROR(JobName(r, "pooling", ParsePooling, &j.pooling));
  REMAT_RETURN_IF_ERROR(JobName(r, "loss", ParseLoss, &j.loss));
  REMAT_RETURN_IF_ERROR(JobInt(r, "texts_per_example", 1, 1024, &j.texts_per_example));
  REMAT_RETURN_IF_ERROR(JobInt(r, "num_labels", 1, 1 << 24, &j.num_labels));
  if (r.Has("merge_columns")) {
    bool merge = true;
    REMAT_RETURN_IF_ERROR(r.Bool("merge_columns", &merge, false));
    j.merge_columns = merge;
  }
  REMAT_RETURN_IF_ERROR(JobInt(r, "loss_chunks", 1, 1 << 24, &j.loss_chunks));
  REMAT_RETURN_IF_ERROR(JobName(r, "optimizer", ParseOptimizer, &j.optimizer));
  REMAT_RETURN_IF_ERROR(JobName(r, "grad_dtype", ParseGradDtype, &j.grad_dtype));
  REMAT_RETURN_IF_ERROR(JobName(r, "gradients", ParseGradients, &j.gradients));
  if (r.Has("dropout")) {
    double dropout = 0;
    REMAT_RETURN_IF_ERROR(r.Double("dropout", &dropout, false, 0, 0.999999));
    j.dropout = dropout;
  }
  REMAT_RETURN_IF_ERROR(JobInt(r, "lora_rank", 0, 1 << 20, &j.lora_rank));
  REMAT_RETURN_IF_ERROR(JobName(r, "lora_targets", ParseLoraTargets, &j.lora_targets));
  if (r.Has("lora_dropout")) {
    double dropout = 0;
    REMAT_RETURN_IF_ERROR(r.Double("lora_dropout", &dropout, false, 0, 0.999999));
    j.lora_dropout = dropout;
  }
  REMAT_RETURN_IF_ERROR(JobName(r, "quantization", ParseQuantization, &j.quantization));
  if (r.Has("alloc_conf")) {
    std::string conf;
    REMAT_RETURN_IF_ERROR(r.String("alloc_conf", &conf, false));
    Result<AllocatorOptions> parsed = ParseAllocConf(conf);
    if (!parsed.ok()) return parsed.status().WithPrefix(where + ": field 'alloc_conf'");
    j.alloc_conf = conf;
  }
  if (r.Has("parallel")) {
    REMAT_ASSIGN_OR_RETURN(j.parallel, ParseParallel(object["parallel"], where + ": parallel"));
  }
  return j;
}

}  // namespace

Result<LoadedPlan> ParsePlanJson(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) {
    return Status::Invalid(source + ": expected a plan object (planner --json output), got " +
                           DescribeJsonValue(doc));
  }
  JsonObjectReader r(doc, source);
  LoadedPlan plan;
  REMAT_RETURN_IF_ERROR(r.String("strategy", &plan.strategy, true));
  REMAT_RETURN_IF_ERROR(r.String("parameter", &plan.parameter, false));
  REMAT_RETURN_IF_ERROR(r.Int("budget_bytes", &plan.budget_bytes, false, 0));
  REMAT_RETURN_IF_ERROR(r.Int("grad_accumulation", &plan.grad_accumulation, false, 1, 1 << 24));
  if (doc.contains("job")) {
    REMAT_ASSIGN_OR_RETURN(plan.job, ParsePlannedJob(doc["job"], source + ": job"));
  }
  if (!doc.contains("profile") || !doc["profile"].is_object()) {
    return r.Error("profile",
                   "missing: a plan file carries the profile it was made for "
                   "(write plans with planner --json)");
  }
  REMAT_ASSIGN_OR_RETURN(plan.profile, ParseProfile(doc["profile"].dump(), source + ": profile"));
  plan.model = plan.profile.model;
  if (!doc.contains("schedule")) return r.Error("schedule", "missing (required)");
  REMAT_ASSIGN_OR_RETURN(
      plan.schedule, ParseScheduleJson(doc["schedule"].dump(), plan.profile.num_layers(), source));
  REMAT_RETURN_IF_ERROR(ValidateSchedule(plan.schedule, plan.profile).WithPrefix(source));
  if (doc.contains("predicted") && doc["predicted"].is_object()) {
    JsonObjectReader pr(doc["predicted"], source + ": predicted");
    REMAT_RETURN_IF_ERROR(pr.Int("peak_bytes", &plan.predicted_peak_bytes, false, 0));
    REMAT_RETURN_IF_ERROR(pr.Double("step_ms", &plan.predicted_step_ms, false, 0, 1e15));
  }
  return plan;
}

Result<PlanSet> PlanSetOf(const LoadedPlan& plan, Plan baseline) {
  PlanSet set;
  REMAT_ASSIGN_OR_RETURN(const Strategy strategy, ParseStrategy(plan.strategy));
  REMAT_ASSIGN_OR_RETURN(set.chosen, MakePlanFromSchedule(plan.profile, strategy, plan.parameter,
                                                          plan.schedule, plan.budget_bytes));
  set.baseline = std::move(baseline);
  set.candidates.push_back(set.chosen);
  return set;
}

}  // namespace remat
