// What a training engine takes for a plan (`planner --export ENGINE`): the
// rendering of an EnginePlan (remat/planning/engine_plan.h, which chose the plan the
// engine runs). Renderers plan nothing.
#ifndef REMAT_EXPORT_H_
#define REMAT_EXPORT_H_

#include <string>

#include "remat/planning/engine_plan.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/report/report.h"

namespace remat {

// The engine's configuration for `e.plan`, ending in a newline:
//   hf          transformers TrainingArguments fields (JSON object); with
//               e.loss_chunks, use_liger_kernel and a liger_kernel_config
//               that turns on Liger-Kernel's fused linear cross-entropy
//               alone
//   deepspeed   a ds_config (JSON object)
//   megatron    Megatron-LM command-line flags (one line)
//   torchtitan  TOML tables [training] and [activation_checkpoint]
//   pytorch     a Python snippet: remat.apply(model, "plan.json"), and
//               apply_activation_checkpointing where the plan is a list of
//               checkpointed blocks
// The micro-batch is the profile's, the accumulation and precision the
// context's (precision only for model inputs).
std::string RenderExport(const EnginePlan& e, const Profile& profile, const ReportContext& ctx);

// One line for people (no newline): the plan the export carries, its loss
// (in how many chunks, and by which switch) and its predicted device total
// and step time, which are those of what the configuration runs; when it
// is not `asked`, that the engine cannot express `asked` (or its chunked
// loss) and that remat.apply(model, plan) applies it exactly.
std::string ExportNote(const EnginePlan& e, const Plan& asked);

}  // namespace remat

#endif  // REMAT_EXPORT_H_
