// A training job to plan: the input file (model.json, config.json or a
// profile) with the overrides a caller applies to it, and the profile the
// strategies work on (analytic for models, as read for profiles). Each fact
// is held once; what a report says about the job is the report's
// (ReportContextOf, remat/report/report.h).
#ifndef REMAT_JOB_H_
#define REMAT_JOB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/model/model_config.h"
#include "remat/model/parallel.h"
#include "remat/profile/profile.h"
#include "remat/ranks/rank_memory.h"
#include "remat/io/status.h"

namespace remat {

// Changes to a model's job fields and to the analytic time model. Model
// fields apply to model.json / config.json inputs only: a profile's sizes
// and times are measured.
struct JobOverrides {
  std::optional<int64_t> micro_batch;  // sequences per micro-batch
  std::optional<int64_t> seq_len;      // tokens per sequence (raises max_position to it)
  std::optional<Precision> precision;
  std::optional<AttentionImpl> attention;
  std::optional<int64_t> lora_rank;      // 0: no LoRA
  std::optional<uint32_t> lora_targets;  // LoraTarget bits
  std::optional<double> lora_dropout;    // PEFT's dropout of the adapters' input, in [0, 1)
  std::optional<Quantization> quantization;
  std::optional<Gradients> gradients;  // when parameter gradients exist
  std::optional<Optimizer> optimizer;
  std::optional<GradDtype> grad_dtype;  // mixed_bf16 / mixed_fp16 only
  std::optional<double> dropout;        // in [0, 1)
  // The head and its loss (a sentence-embedding job: head kPooling, loss
  // kMnrl, texts_per_example 2 or 3). A config.json encoder given the
  // pooling head also gets the pooler AutoModel loads, as its "remat" block
  // would give it.
  std::optional<Head> head;
  std::optional<Pooling> pooling;  // pooling head only
  std::optional<Loss> loss;
  std::optional<int64_t> texts_per_example;  // mnrl: 2 pairs, 3 triplets
  std::optional<int64_t> num_labels;         // classification head only
  std::optional<bool> merge_columns;         // mnrl: the columns after the anchors in one pass
  std::optional<int64_t> loss_chunks;        // chunked cross-entropy (ModelConfig::loss_chunks)
  // Micro-batches per optimizer step: changes no size or time of a
  // micro-step, so it applies to profiles too.
  std::optional<int64_t> grad_accumulation;
  // The ranks the job runs on (--gpus, --ddp, --zero, --fsdp, --tp, --pp,
  // ...): the job's profile is then one rank's. On a profile input only the
  // data-parallel division of the model state applies.
  std::optional<Parallelism> parallel;
  std::optional<std::string> device;  // analytic times: "h200", "a100" (default), ...
  std::optional<double> tflops;       // analytic times: achieved TFLOP/s, > 0
  bool any_model_field() const {
    return micro_batch || seq_len || precision || attention || lora_rank || lora_targets ||
           lora_dropout || quantization || gradients || optimizer || grad_dtype || dropout ||
           head || pooling || loss || texts_per_example || num_labels || merge_columns ||
           loss_chunks;
  }
  bool any() const { return any_model_field() || device || tflops; }
};

struct Job {
  std::string path;  // the input file, as given
  PlannerInput::Kind kind = PlannerInput::Kind::kModel;
  // Model inputs: the model.json / config.json with the overrides applied.
  // Profile inputs: unused (sizes and times are measured).
  ModelConfig model;
  AnalyticOptions analytic;
  // Analytic for model inputs, as read for profiles. Its grad_accumulation
  // (micro-batches per optimizer step) is the job's. A distributed job's is
  // the profile of its rank with the most model state (ranks).
  Profile profile;
  // A distributed job (analytic.parallel.distributed()): each distinct rank
  // with its profile and model state, one per pipeline stage. Empty on one
  // GPU.
  std::vector<RankMemory> ranks;
  // The layout of `model` the ranks were made from (BuildRankLayout), where
  // the job built it; null on one GPU, for profile inputs and where the
  // caller lent the layout.
  std::shared_ptr<const RankLayout> layout;
  // A config.json that sets no sequence length, and no --seq-len: the job
  // plans at the default (PlannerInput::default_seq_len, kDefaultSeqLen).
  bool default_seq_len = false;
  // (A field added here is one WithoutProfile copies.)
  const Parallelism& parallel() const { return analytic.parallel; }
  bool has_config() const { return kind != PlannerInput::Kind::kProfile; }
  const ModelConfig& config() const { return model; }
  int64_t grad_accumulation() const { return profile.grad_accumulation; }
};

// The job of an input already read (e.g. by LoadPlannerInput), with
// overrides applied and validated, and its profile built.
Result<Job> MakeJob(PlannerInput input, const JobOverrides& overrides);

// Reads `path` and makes its job.
Result<Job> LoadJob(const std::string& path, const JobOverrides& overrides);

// The job's model with another micro-batch (and, when `grad_accumulation`
// > 0, another accumulation): its analytic profile, and a distributed job's
// ranks from `layout` where given (BuildRankLayout of the job's model at
// any micro-batch and accumulation: the ranks are those made afresh). Fails
// for profile inputs.
Result<Job> WithMicroBatch(const Job& job, int64_t micro_batch, int64_t grad_accumulation = 0,
                           const RankLayout* layout = nullptr);

// The job on the ranks `p` describes: its model's profile and ranks made
// again under `p`, or, for a profile input planned on one GPU, its profile
// divided as data parallelism divides it. Fails as MakeJob does for `p`,
// and for a profile input whose ranks are set already.
Result<Job> WithParallel(const Job& job, const Parallelism& p);

// `job` without its profile and ranks but the profile's host link: what
// ModelProfile and WithParallel read of a model's job (its model, analytic
// options, path and --host-link), without copying what they make again.
Job WithoutProfile(const Job& job);

// The analytic profile WithParallel(job, p) starts from: the job's model on
// one rank of `p`'s tensor- and sequence-parallel degrees, before the model
// state is divided (AnalyticOptions::parallel reads only those two). The
// same for every `p` with those degrees, so the data-parallel layouts of
// one model can share it. Fails for profile inputs, and as AnalyticProfile
// does.
Result<Profile> ModelProfile(const Job& job, const Parallelism& p);

// WithParallel(job, p) with `model_profile`, ModelProfile's for the job's
// model under `p`'s tensor and sequence degrees, instead of making it
// again, and the model's ranks from `layout` (BuildRankLayout's for the
// job's model) where given. Fails as WithParallel does, and for a profile
// input.
Result<Job> WithParallel(const Job& job, const Parallelism& p, const Profile& model_profile,
                         const RankLayout* layout = nullptr);

}  // namespace remat

#endif  // REMAT_JOB_H_
