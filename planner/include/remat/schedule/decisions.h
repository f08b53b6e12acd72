// Per-layer decisions: what a single-level plan does with each layer's
// activations, and the schedule that carries them out. A summary of a
// schedule (SummarizeDecisions) and a way to build one
// (BuildSingleLevelSchedule); the layer below plans and strategies.
#ifndef REMAT_DECISIONS_H_
#define REMAT_DECISIONS_H_

#include <vector>

#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/io/status.h"

namespace remat {

// What happens to a layer's activations, as a summary of the schedule.
enum class LayerDecision {
  kKeep,        // forward with grad, everything kept until backward
  kCheckpoint,  // only its input kept; recomputed before its backward
  kRecompute,   // nothing kept; recomputed from an earlier checkpoint
  kSelective,   // forward with grad under a selective option
  kOffload,     // a kCheckpoint whose input x[i] is offloaded to host memory
                // after its forward and prefetched back before its recompute
                // (schedule.h kOffload); needs a layer i >= 1 whose layer i-1
                // runs without grad (x[i] must be a checkpoint) and a host link
};
const char* ToString(LayerDecision d);

// Builds the single-level schedule for per-layer decisions: a kCheckpoint
// layer starts a segment that runs without grad and keeps only its input;
// following kRecompute layers extend the segment. In backward each segment is
// recomputed with grad right before its layers' backwards.
// `selective_option[i]` is used for kSelective layers (may be empty: option 0).
// kOffload layers are kCheckpoint layers whose checkpoints InsertOffloads
// moves, their prefetch issued kOffloadPrefetchLead compute ops early.
Result<Schedule> BuildSingleLevelSchedule(const Profile& profile,
                                          const std::vector<LayerDecision>& decisions,
                                          const std::vector<int>& selective_option);

// Compute ops (forward, recompute, backward) a kOffload layer's prefetch is
// issued before its recompute: over an overlapped link its copy hides behind
// that many ops (the next layer's backward).
inline constexpr int kOffloadPrefetchLead = 1;

// Whether decision `d` starts or extends a segment run without grad.
inline bool RunsWithoutGrad(LayerDecision d) {
  return d == LayerDecision::kCheckpoint || d == LayerDecision::kRecompute ||
         d == LayerDecision::kOffload;
}

// Per-layer decisions read back from a schedule's first forward pass (a
// checkpoint the schedule offloads before its first backward is kOffload).
void SummarizeDecisions(const Schedule& schedule, std::vector<LayerDecision>* decisions,
                        std::vector<int>* selective_option);

}  // namespace remat

#endif  // REMAT_DECISIONS_H_
