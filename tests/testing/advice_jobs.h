// Real configs and layouts with the changes the fit advice weighs, for the
// tests of what the advice plans (peak floors, auto's choice): Llama 3.1
// 8B and 70B (examples/hf) on one GPU, DDP, ZeRO-3, FSDP2 full and hybrid
// shard, tensor and pipeline parallelism, with and without a device's
// terms, the model state offloaded, and gradient accumulation.
#ifndef REMAT_TESTS_TESTING_ADVICE_JOBS_H_
#define REMAT_TESTS_TESTING_ADVICE_JOBS_H_

#include <string>

#include "remat/planning/planning.h"

namespace remat::testing {

struct AdviceJob {
  const char* config;  // examples/hf/<config>.config.json
  int64_t gpus;
  DataParallel data;
  int64_t tensor;    // with sequence parallelism where > 1
  int64_t pipeline;  // 1F1B
  int64_t seq_len;
  int64_t micro_batch;
  const char* device;  // "": no device terms
  StateOffload offload = StateOffload::kNone;
  int64_t grad_accumulation = 1;
};

// The layouts of bench/speed/grid.py's no-fit commands and a few others.
inline constexpr AdviceJob kAdviceJobs[] = {
    {"llama-3.1-8b", 1, DataParallel::kNone, 1, 1, 4096, 1, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kDdp, 1, 1, 8192, 1, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 2, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 2, ""},
    {"llama-3.1-8b", 16, DataParallel::kFsdp2, 2, 1, 8192, 2, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kNone, 1, 4, 4096, 1, "a100"},
    {"llama-3.1-70b", 8, DataParallel::kFsdp2, 1, 1, 8192, 1, "h100"},
    {"llama-3.1-70b", 64, DataParallel::kHsdp, 1, 1, 8192, 1, "h100"},
    {"llama-3.1-70b", 64, DataParallel::kZero3, 1, 1, 4096, 1, "h200"},
    // The state offload the advice weighs on the job's own GPUs.
    {"llama-3.1-8b", 1, DataParallel::kFsdp2, 1, 1, 2048, 1, "rtx4090", StateOffload::kFsdpCpu},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 2, "h100", StateOffload::kFsdpCpu},
    {"llama-3.1-8b", 8, DataParallel::kZero2, 1, 1, 8192, 1, "h100", StateOffload::kOptimizer},
    {"llama-3.1-70b", 64, DataParallel::kZero3, 1, 1, 4096, 1, "h200", StateOffload::kOptimizer},
    // Gradient accumulation: the later micro-steps back-propagate into
    // existing gradients (the accumulating workspace), on the stages of a
    // 1F1B pipeline with their micro-batches in flight too.
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 1, "h100", StateOffload::kNone, 4},
    {"llama-3.1-8b", 8, DataParallel::kDdp, 1, 1, 4096, 1, "h100", StateOffload::kNone, 4},
    {"llama-3.1-8b", 8, DataParallel::kNone, 1, 4, 4096, 1, "a100", StateOffload::kNone, 8},
};

// One change the advice weighs, as its flags set it.
struct AdviceChange {
  const char* name;
  void (*apply)(JobOverrides*);
};

inline constexpr AdviceChange kAdviceChanges[] = {
    {"as given", [](JobOverrides*) {}},
    {"optimizer adafactor", [](JobOverrides* o) { o->optimizer = Optimizer::kAdafactor; }},
    {"optimizer adamw8bit", [](JobOverrides* o) { o->optimizer = Optimizer::kAdamW8bit; }},
    {"precision bf16", [](JobOverrides* o) { o->precision = Precision::kBf16; }},
    {"gradients created_in_backward",
     [](JobOverrides* o) { o->gradients = Gradients::kCreatedInBackward; }},
    {"LoRA", [](JobOverrides* o) { o->lora_rank = 16; }},
    {"QLoRA",
     [](JobOverrides* o) {
       o->lora_rank = 16;
       o->quantization = Quantization::kNf4;
     }},
    {"chunked loss", [](JobOverrides* o) { o->loss_chunks = 16; }},
};

// What a test's trace names the job and change by.
inline std::string Describe(const AdviceJob& g, const AdviceChange& c) {
  return std::string(g.config) + " on " + std::to_string(g.gpus) + " GPUs (" + ToString(g.data) +
         ", tp " + std::to_string(g.tensor) + ", pp " + std::to_string(g.pipeline) +
         ", offload " + ToString(g.offload) + "), " + c.name +
         (*g.device ? std::string(", ") + g.device : "");
}

// The job of `g` (mixed bf16) with `c`, as the planner loads it.
inline Result<Job> LoadAdviceJob(const AdviceJob& g, const AdviceChange& c) {
  JobOverrides o;
  o.precision = Precision::kMixedBf16;
  o.seq_len = g.seq_len;
  o.micro_batch = g.micro_batch;
  o.grad_accumulation = g.grad_accumulation;
  if (g.gpus > 1 || g.offload != StateOffload::kNone) {
    Parallelism p;
    p.gpus = g.gpus;
    p.data = g.data;
    p.tensor = g.tensor;
    p.sequence = g.tensor > 1;
    p.pipeline = g.pipeline;
    p.offload = g.offload;
    o.parallel = p;
  }
  c.apply(&o);
  return LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/" + g.config + ".config.json", o);
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_ADVICE_JOBS_H_
