// The plan a training engine can take. Users train in their own engine
// (PyTorch with remat.apply, Hugging Face transformers, DeepSpeed,
// Megatron-LM, torchtitan), and each engine's checkpointing switch
// expresses only some shapes of plan over the model's blocks. PlanForEngine
// says whether an engine expresses a plan exactly and, when it does not,
// plans the closest shape it does express; remat/report/export.h renders the
// engine's configuration.
#ifndef REMAT_ENGINE_PLAN_H_
#define REMAT_ENGINE_PLAN_H_

#include <string_view>

#include "remat/planning/job.h"
#include "remat/plan/plan.h"
#include "remat/io/status.h"

namespace remat {

enum class Engine { kPytorch, kHf, kDeepspeed, kMegatron, kTorchtitan };
// "pytorch", "hf", "deepspeed", "megatron", "torchtitan".
const char* ToString(Engine e);
// Accepts the names ToString prints; the error lists them.
Result<Engine> ParseEngine(std::string_view text);

// The shapes of plan engines take, over one pass's blocks (layers of other
// kinds are kept).
enum class EngineShape {
  kAsPlanned,  // the plan itself: remat.apply(model, plan)
  kNone,       // nothing recomputed
  // Chunks of n blocks: each chunk's input kept, the chunk recomputed in
  // backward (the last chunk may be shorter); n = 1 checkpoints every block.
  // remat's uniform every n.
  kChunks,
  kFirstBlocks,  // blocks 0..n-1 each checkpointed, the rest kept (Megatron's block method)
  kEveryNth,     // blocks n-1, 2n-1, ... each checkpointed, the rest kept (torchtitan's frequency)
  // Blocks 0, n, 2n, ... each checkpointed, the rest kept (transformers'
  // every_n_layers: a block is checkpointed where its index modulo n is 0).
  kEveryNthFromFirst,
  kSelectiveAttention,  // every block recomputes its attention core (Megatron's selective)
  // Every block checkpointed and every checkpoint that can move offloaded to
  // host memory, its copies in line on the compute stream (transformers'
  // activation checkpointing with offload: torch.autograd.graph.save_on_cpu
  // around each block's checkpoint, which copies to pinned memory when the
  // forward saves the block's input and back when its recompute reads it).
  // Planned as remat's offload strategy at every 1 with every movable
  // checkpoint offloaded, over the profile's link made in line.
  kEveryBlockOffloaded,
};

struct EnginePlan {
  Engine engine = Engine::kPytorch;
  EngineShape shape = EngineShape::kAsPlanned;
  int n = 0;          // kChunks, kFirstBlocks, kEveryNth, kEveryNthFromFirst: the shape's n
  bool exact = true;  // `plan` is the plan asked about
  Plan plan;          // what the engine runs: planned, with its own prediction
  // The chunked loss (ModelConfig::loss_chunks, resolved) of the job the
  // plan asked about, and of the job `plan` was made for: what the engine's
  // configuration runs (EngineLossChunks; 0: the whole loss).
  int64_t asked_loss_chunks = 0;
  int64_t loss_chunks = 0;
};

// The chunked loss `engine`'s configuration runs for `job`, whose own
// chunked loss is ModelConfig::loss_chunks: the job's where remat.apply
// runs the model (pytorch); for hf, Liger-Kernel's fused linear
// cross-entropy (TrainingArguments' use_liger_kernel) on the llama family,
// whose model types Liger-Kernel patches, at Liger-Kernel's own chunk count
// (the tokens over ceil(vocab / hidden) rows, rounded up to a power of two:
// remat's auto count); 0 for the other engines, whose configurations have
// no chunked loss, for GPT-2 under hf, and for a job without one.
int64_t EngineLossChunks(Engine engine, const Job& job);

// How `engine` runs `plan`, made for `job` under `options` (the budget and
// device memory terms are kept for any other plan). Exact when the engine
// runs the job's chunked loss (EngineLossChunks) and one of the engine's
// shapes plans to the same per-layer decisions; otherwise the best plan
// (BetterPlan: fitting first, then faster) among the engine's shapes, each
// planned as RunPlanner plans that strategy (MakePlan) on the job with the
// chunked loss the engine runs. Errors: as MakePlan's, and as WithParallel's
// for the job made again with another chunked loss.
Result<EnginePlan> PlanForEngine(const Job& job, const PlanOptions& options, const Plan& plan,
                                 Engine engine);

}  // namespace remat

#endif  // REMAT_ENGINE_PLAN_H_
