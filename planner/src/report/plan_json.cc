// plan.json: a planning result written as a self-contained file (remat/report/report.h).
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "profile/profile_json.h"
#include "remat/analytic/analytic.h"
#include "remat/plan/plan_file.h"
#include "remat/planning/planning.h"
#include "remat/report/report.h"
#include "remat/simulate/accumulation.h"
#include "schedule/schedule_json.h"

namespace remat {

using internal::DumpDocument;
using internal::ProfileJsonValue;
using internal::ScheduleJsonValue;
namespace {

nlohmann::ordered_json PredictedJson(const Plan& plan, const UpdatePrediction& u) {
  const SimulationResult& r = plan.predicted;
  nlohmann::ordered_json j;
  j["peak_bytes"] = r.peak_bytes;
  j["allocated_peak_bytes"] = plan.memory.allocated_peak_bytes;
  j["reserved_peak_bytes"] = plan.memory.reserved_peak_bytes;
  j["device_peak_bytes"] = plan.memory.total_bytes;
  j["activation_peak_bytes"] = r.activation_peak_bytes;
  j["static_bytes"] = r.static_bytes;
  j["step_ms"] = r.step_ms;
  j["recompute_ms"] = r.recompute_ms;
  j["forward_ms"] = r.forward_ms;
  j["backward_ms"] = r.backward_ms;
  j["optimizer_ms"] = r.optimizer_ms;
  // One optimizer step of grad_accumulation micro-batches (accumulation.h).
  j["micro_step_ms"] = u.micro_step_ms;
  j["accumulate_ms"] = u.accumulate_ms;
  j["optimizer_step_ms"] = u.optimizer_step_ms;
  j["update_ms"] = u.update_ms;
  j["tokens_per_s"] = u.tokens_per_s;
  j["recompute_ops"] = r.recompute_ops;
  if (r.offloaded_bytes > 0) {  // activation offload (simulator.h)
    j["transfer_ms"] = r.transfer_ms;
    j["link_busy_ms"] = r.link_busy_ms;
    j["offloaded_bytes"] = r.offloaded_bytes;
    j["host_peak_bytes"] = r.host_peak_bytes;
  }
  j["peak_op"] = r.peak_op;
  nlohmann::ordered_json at;
  for (int c = 0; c < static_cast<int>(MemoryCategory::kCount); ++c) {
    at[ToString(static_cast<MemoryCategory>(c))] = r.at_peak.bytes[c];
  }
  j["at_peak"] = at;
  return j;
}

// The device's terms and what they add to the plan (remat/device/device_memory.h).
nlohmann::ordered_json DeviceMemoryJson(const Plan& plan) {
  const DeviceMemoryTerms& t = plan.terms;
  const DeviceMemoryUse& m = plan.memory;
  nlohmann::ordered_json j;
  j["source"] = t.source;
  j["cuda_context_bytes"] = m.cuda_context_bytes;
  j["workspace_bytes"] = m.workspace_bytes;
  j["fragmentation"] = t.fragmentation_fraction();
  j["caching_allocator"] = t.caching_allocator;
  // With a caching allocator: how the reserved peak was found, "replay"
  // (the allocator model over the plan's steps) or "fragmentation" (the
  // user's fraction), and the PYTORCH_CUDA_ALLOC_CONF replayed.
  if (t.caching_allocator) {
    j["reserved_model"] = t.replays_allocator() ? "replay" : "fragmentation";
    j["alloc_conf"] = t.alloc_conf_text;
  }
  j["allocator_rounding_bytes"] = m.allocator_rounding_bytes;
  j["fragmentation_bytes"] = m.fragmentation_bytes;
  j["replay_margin_bytes"] = m.replay_margin_bytes;
  j["tensor_budget_bytes"] = TensorBudget(plan.budget_bytes, t);
  if (m.replay) {
    const AllocatorReplaySummary& r = *m.replay;
    j["replay"] = {{"micro_steps", r.micro_steps},
                   {"steady", r.steady},
                   {"device_allocs", r.device_allocs},
                   {"alloc_retries", r.alloc_retries},
                   {"under_budget_limit", r.under_budget_limit},
                   {"out_of_memory", r.out_of_memory}};
  }
  return j;
}

nlohmann::ordered_json PlanSummaryJson(const Plan& p) {
  nlohmann::ordered_json j;
  j["strategy"] = ToString(p.strategy);
  j["parameter"] = p.parameter;
  j["fits"] = p.fits;
  j["peak_bytes"] = p.predicted.peak_bytes;
  j["device_peak_bytes"] = p.memory.total_bytes;
  j["step_ms"] = p.predicted.step_ms;
  j["recompute_ms"] = p.predicted.recompute_ms;
  return j;
}

// job.parallel: the ranks the plan was made for (ParseParallel reads it).
nlohmann::ordered_json ParallelJson(const Parallelism& p) {
  nlohmann::ordered_json j;
  j["gpus"] = p.gpus;
  j["data"] = ToString(p.data);
  j["data_ranks"] = p.data_ranks();
  j["shard_ranks"] = p.shard_ranks();
  j["tensor"] = p.tensor;
  j["sequence"] = p.sequence;
  j["pipeline"] = p.pipeline;
  j["schedule"] = ToString(p.schedule);
  j["virtual_stages"] = p.virtual_stages;
  j["bucket_cap_mb"] = p.bucket_cap_mb;
  j["reshard_after_forward"] = p.reshard_after_forward;
  j["shard_group"] = p.shard_group;
  j["persistence_threshold"] = p.persistence_threshold;
  j["fsdp_no_sync"] = p.fsdp_no_sync;
  j["fsdp_units"] = ToString(p.fsdp_units);
  if (p.offload != StateOffload::kNone) j["state_offload"] = ToString(p.offload);
  return j;
}

// The job's fields as planned, under model.json's names (PlannedJob,
// remat/plan/plan_file.h, reads them back).
nlohmann::ordered_json PlannedJobJson(const PlannedJob& p) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (p.precision) j["precision"] = ToString(*p.precision);
  if (p.attention) j["attention"] = ToString(*p.attention);
  if (p.head) j["head"] = ToString(*p.head);
  if (p.pooling) j["pooling"] = ToString(*p.pooling);
  if (p.loss) j["loss"] = ToString(*p.loss);
  if (p.texts_per_example) j["texts_per_example"] = *p.texts_per_example;
  if (p.num_labels) j["num_labels"] = *p.num_labels;
  if (p.merge_columns) j["merge_columns"] = *p.merge_columns;
  if (p.loss_chunks) j["loss_chunks"] = *p.loss_chunks;
  if (p.optimizer) j["optimizer"] = ToString(*p.optimizer);
  if (p.grad_dtype) j["grad_dtype"] = ToString(*p.grad_dtype);
  if (p.gradients) j["gradients"] = ToString(*p.gradients);
  if (p.dropout) j["dropout"] = *p.dropout;
  if (p.lora_rank) j["lora_rank"] = *p.lora_rank;
  if (p.lora_targets) j["lora_targets"] = LoraTargetsToString(*p.lora_targets);
  if (p.lora_dropout) j["lora_dropout"] = *p.lora_dropout;
  if (p.quantization) j["quantization"] = ToString(*p.quantization);
  if (p.alloc_conf) j["alloc_conf"] = *p.alloc_conf;
  if (p.parallel) j["parallel"] = ParallelJson(*p.parallel);
  return j;
}

// The distinct ranks, each with its peak and what the peak holds.
nlohmann::ordered_json PerRankJson(const std::vector<RankPlan>& ranks) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RankPlan& r : ranks) {
    const Plan& p = r.plans.chosen;
    nlohmann::ordered_json j;
    j["rank"] = r.memory.rank;
    j["ranks"] = r.memory.ranks;
    j["stage"] = r.memory.stage;
    j["fits"] = p.fits;
    j["peak_bytes"] = p.predicted.peak_bytes;
    j["device_peak_bytes"] = p.memory.total_bytes;
    j["static_bytes"] = p.predicted.static_bytes;
    j["strategy"] = ToString(p.strategy);
    j["parameter"] = p.parameter;
    // Pipeline: the micro-batches in flight at its peak, per model chunk.
    if (r.memory.parallel.pipeline > 1) j["in_flight_microbatches"] = r.memory.in_flight;
    // FSDP2: the blocks of its largest fully_shard unit (the plan's largest
    // recompute segment).
    if (r.memory.parallel.data == DataParallel::kFsdp2 ||
        r.memory.parallel.data == DataParallel::kHsdp) {
      j["gather_blocks"] = r.memory.state.gather_blocks;
    }
    nlohmann::ordered_json terms = nlohmann::ordered_json::object();
    for (const MemoryTerm& t : RankTermsAtPeak(r)) terms[t.name] = t.bytes;
    j["terms"] = terms;
    // State offload: what the rank keeps in host memory, by term.
    if (r.memory.state.host_bytes() > 0) {
      j["host_bytes"] = r.memory.state.host_bytes();
      nlohmann::ordered_json host = nlohmann::ordered_json::object();
      for (const MemoryTerm& t : r.memory.state.host_terms()) host[t.name] = t.bytes;
      j["host_terms"] = host;
      j["offload_copy_bytes"] = r.memory.state.host_copy_bytes;
    }
    out.push_back(j);
  }
  return out;
}

// --global-batch: every (b, K, plan) weighed, the chosen one marked.
nlohmann::ordered_json BatchSearchJson(const BatchSearch& search) {
  nlohmann::ordered_json j;
  j["global_batch"] = search.global_batch;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < search.weighed.size(); ++i) {
    const BatchCandidate& c = search.weighed[i];
    nlohmann::ordered_json r;
    r["micro_batch"] = c.micro_batch;
    r["grad_accumulation"] = c.grad_accumulation;
    r["strategy"] = ToString(c.plan.strategy);
    r["parameter"] = c.plan.parameter;
    r["fits"] = c.plan.fits;
    r["chosen"] = static_cast<int>(i) == search.chosen;
    r["peak_bytes"] = c.plan.predicted.peak_bytes;
    r["update_ms"] = c.update.update_ms;
    r["tokens_per_s"] = c.update.tokens_per_s;
    rows.push_back(r);
  }
  j["weighed"] = rows;
  j["not_planned"] = search.skipped;  // larger micro-batches, past the first that does not fit
  return j;
}

// Why no plan fits and what would: the message the text report ends with,
// the micro-batches that fit, and the combinations of levers that fit
// (fastest first; "listed": named in the message).
nlohmann::ordered_json FitAdviceJson(const FitAdvice& a) {
  nlohmann::ordered_json j;
  j["message"] = a.message;
  j["lowest_peak_bytes"] = a.lowest_peak_bytes;
  j["lowest_peak_strategy"] = ToString(a.lowest_peak_strategy);
  j["model_state_bytes"] = a.model_state_bytes;
  j["model_state_exceeds_budget"] = a.model_state_exceeds_budget;
  nlohmann::ordered_json batches = nlohmann::ordered_json::array();
  for (const FitSuggestion& s : a.suggestions) {
    batches.push_back({{"micro_batch", s.micro_batch},
                       {"grad_accumulation", s.grad_accumulation},
                       {"strategy", ToString(s.plan.strategy)},
                       {"peak_bytes", s.plan.predicted.peak_bytes},
                       {"step_ms", s.plan.predicted.step_ms}});
  }
  j["micro_batches"] = batches;
  nlohmann::ordered_json alternatives = nlohmann::ordered_json::array();
  for (const FitAlternative& alt : a.alternatives) {
    nlohmann::ordered_json entry = {{"changes", alt.changes},
                                    {"flags", alt.flags},
                                    {"gpus", alt.gpus},
                                    {"full_fine_tuning", alt.full_fine_tuning},
                                    {"listed", alt.listed},
                                    {"strategy", ToString(alt.plan.strategy)},
                                    {"peak_bytes", alt.plan.predicted.peak_bytes},
                                    {"device_peak_bytes", alt.plan.memory.total_bytes},
                                    {"step_ms", alt.plan.predicted.step_ms}};
    // State offload: the model state a rank keeps on the host.
    if (alt.host_bytes > 0) entry["host_bytes"] = alt.host_bytes;
    alternatives.push_back(entry);
  }
  j["alternatives"] = alternatives;
  return j;
}

}  // namespace

std::string PlanToJson(const PlanSet& plans, const Profile& profile, const ReportContext& ctx) {
  const Plan& plan = plans.chosen;
  nlohmann::ordered_json j;
  j["fits"] = plan.fits;
  j["strategy"] = ToString(plan.strategy);
  j["parameter"] = plan.parameter;
  j["auto_selected"] = plans.auto_selected;
  j["budget_bytes"] = plan.budget_bytes;
  j["micro_batch"] = profile.micro_batch;
  j["grad_accumulation"] = ctx.grad_accumulation;
  if (ctx.batch != nullptr) j["global_batch"] = BatchSearchJson(*ctx.batch);
  if (ctx.advice != nullptr) j["fit_advice"] = FitAdviceJson(*ctx.advice);
  j["model"] = {{"name", profile.model},
                {"parameters", profile.parameters},
                {"trainable_parameters",
                 ctx.has_config ? TrainableParametersOf(ctx) : profile.parameters},
                {"input", ctx.input_path},
                {"profile_source", profile.source},
                {"micro_batch", profile.micro_batch},
                {"seq_len", profile.seq_len}};
  if (ctx.default_seq_len) j["model"]["seq_len_default"] = true;
  if (ctx.has_config || ctx.parallel.distributed()) {
    PlannedJob job = ctx.has_config ? PlannedJobOf(ctx.config) : PlannedJob{};
    if (!plan.terms.alloc_conf_text.empty()) job.alloc_conf = plan.terms.alloc_conf_text;
    if (ctx.parallel.distributed()) job.parallel = ctx.parallel;
    j["job"] = PlannedJobJson(job);
  }
  j["predicted"] =
      PredictedJson(plan, PredictUpdate(profile, plan.predicted, ctx.grad_accumulation));
  if (ctx.ranks != nullptr && !ctx.ranks->empty()) {
    j["predicted"]["per_rank"] = PerRankJson(*ctx.ranks);
  }
  j["device_memory"] = DeviceMemoryJson(plan);
  j["baseline"] = PlanSummaryJson(plans.baseline);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (int i = 0; i < profile.num_layers(); ++i) {
    const LayerProfile& l = profile.layers[i];
    nlohmann::ordered_json lj;
    lj["index"] = i;
    lj["name"] = l.name;
    if (!l.kind.empty()) lj["kind"] = l.kind;
    if (!l.attention_backend.empty()) lj["attention_backend"] = l.attention_backend;
    lj["decision"] = ToString(plan.decisions[i]);
    if (plan.selective_option[i] >= 0) {
      lj["selective_option"] = l.selective[plan.selective_option[i]].name;
    }
    lj["activation_bytes"] = l.activation_bytes;
    lj["bytes_at_peak"] = plan.predicted.layer_bytes_at_peak[i];
    layers.push_back(lj);
  }
  j["layers"] = layers;
  nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
  for (const Plan& c : plans.candidates) candidates.push_back(PlanSummaryJson(c));
  j["candidates"] = candidates;
  j["schedule"] = ScheduleJsonValue(plan.schedule);
  j["profile"] = ProfileJsonValue(profile);
  return DumpDocument(j);
}

}  // namespace remat
