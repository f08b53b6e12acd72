#include "palette.h"

namespace remat::viz {

const char* CategoryColor(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kModelState:
      return "#bab0ac";
    case MemoryCategory::kActivations:
      return "#4e79a7";
    case MemoryCategory::kRecomputed:
      return "#f28e2b";
    case MemoryCategory::kGradients:
      return "#59a14f";
    case MemoryCategory::kWorkspace:
      return "#b07aa1";
    case MemoryCategory::kParameterGrads:
      return "#edc948";
    case MemoryCategory::kCount:
      break;
  }
  return "#000000";
}

const char* CategoryLabel(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kModelState:
      return "model state";
    case MemoryCategory::kActivations:
      return "activations kept";
    case MemoryCategory::kRecomputed:
      return "recomputed";
    case MemoryCategory::kGradients:
      return "activation grads";
    case MemoryCategory::kWorkspace:
      return "workspace";
    case MemoryCategory::kParameterGrads:
      return "parameter grads";
    case MemoryCategory::kCount:
      break;
  }
  return "?";
}

const char* PhaseColor(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return "#334e68";
    case OpKind::kRecompute:
      return "#f28e2b";  // the colour of recomputed memory
    case OpKind::kBackward:
      return "#7b93ab";
    case OpKind::kOptimizerStep:
      return "#bcccdc";
    case OpKind::kOffload:
    case OpKind::kPrefetch:
      return "#59a14f";  // a copy over the host link
    case OpKind::kFree:
      break;
  }
  return "#cbd2d9";
}

const char* PhaseLabel(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return "forward";
    case OpKind::kRecompute:
      return "recompute";
    case OpKind::kBackward:
      return "backward";
    case OpKind::kOptimizerStep:
      return "optimizer";
    case OpKind::kFree:
      return "free";
    case OpKind::kOffload:
      return "offload";
    case OpKind::kPrefetch:
      return "prefetch";
  }
  return "?";
}

const char* DecisionColor(LayerDecision d) {
  switch (d) {
    case LayerDecision::kKeep:
      return "#4e79a7";
    case LayerDecision::kCheckpoint:
      return "#b07aa1";
    case LayerDecision::kRecompute:
      return "#f28e2b";
    case LayerDecision::kSelective:
      return "#2a9d8f";
    case LayerDecision::kOffload:
      return "#e15759";
  }
  return "#000000";
}

std::string PlanName(Strategy strategy, const std::string& parameter) {
  std::string name = ToString(strategy);
  if (!parameter.empty()) name += " (" + parameter + ")";
  return name;
}

const char* StrategyColor(Strategy s) {
  switch (s) {
    case Strategy::kNone:
      return "#7b8794";
    case Strategy::kUniform:
      return "#4e79a7";
    case Strategy::kSegment:
      return "#76b7b2";
    case Strategy::kSelective:
      return "#59a14f";
    case Strategy::kOptimal:
      return "#f28e2b";
    case Strategy::kOptimalSingle:
      return "#b07aa1";
    case Strategy::kManual:
      return "#9c755f";
    case Strategy::kOffload:
      return "#e15759";
    case Strategy::kAuto:
      break;
  }
  return "#1f2933";
}

}  // namespace remat::viz
