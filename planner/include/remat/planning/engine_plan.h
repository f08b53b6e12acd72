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
  kSelectiveAttention,  // every block recomputes its attention core (Megatron's selective)
};

struct EnginePlan {
  Engine engine = Engine::kPytorch;
  EngineShape shape = EngineShape::kAsPlanned;
  int n = 0;          // kChunks, kFirstBlocks, kEveryNth: the shape's n
  bool exact = true;  // `plan` is the plan asked about
  Plan plan;          // what the engine runs: planned, with its own prediction
};

// How `engine` runs `plan`, made for `job` under `options` (the budget and
// device memory terms are kept for any other plan). Exact when one of the
// engine's shapes plans to the same per-layer decisions; otherwise the best
// plan (BetterPlan: fitting first, then faster) among the engine's shapes,
// each planned as RunPlanner plans that strategy (MakePlan). Errors: as
// MakePlan's.
Result<EnginePlan> PlanForEngine(const Job& job, const PlanOptions& options, const Plan& plan,
                                 Engine engine);

}  // namespace remat

#endif  // REMAT_ENGINE_PLAN_H_
