// Per-layer decisions: what a single-level plan does with each layer's
// activations, and the schedule that carries them out. A summary of a
// schedule (SummarizeDecisions) and a way to build one
// (BuildSingleLevelSchedule); the layer below plans and strategies.
#ifndef REMAT_DECISIONS_H_
#define REMAT_DECISIONS_H_

#include <vector>

#include "remat/profile.h"
#include "remat/schedule.h"
#include "remat/status.h"

namespace remat {

// What happens to a layer's activations, as a summary of the schedule.
enum class LayerDecision {
  kKeep,        // forward with grad, everything kept until backward
  kCheckpoint,  // only its input kept; recomputed before its backward
  kRecompute,   // nothing kept; recomputed from an earlier checkpoint
  kSelective,   // forward with grad under a selective option
};
const char* ToString(LayerDecision d);

// Builds the single-level schedule for per-layer decisions: a kCheckpoint
// layer starts a segment that runs without grad and keeps only its input;
// following kRecompute layers extend the segment. In backward each segment is
// recomputed with grad right before its layers' backwards.
// `selective_option[i]` is used for kSelective layers (may be empty: option 0).
Result<Schedule> BuildSingleLevelSchedule(const Profile& profile,
                                          const std::vector<LayerDecision>& decisions,
                                          const std::vector<int>& selective_option);

// Per-layer decisions read back from a schedule's first forward pass.
void SummarizeDecisions(const Schedule& schedule, std::vector<LayerDecision>* decisions,
                        std::vector<int>* selective_option);

}  // namespace remat

#endif  // REMAT_DECISIONS_H_
