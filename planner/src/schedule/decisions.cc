// Per-layer decisions: the single-level schedule they mean, and the decisions
// a schedule's first forward pass shows.
#include "remat/schedule/decisions.h"

namespace remat {

const char* ToString(LayerDecision d) {
  switch (d) {
    case LayerDecision::kKeep:
      return "keep";
    case LayerDecision::kCheckpoint:
      return "checkpoint";
    case LayerDecision::kRecompute:
      return "recompute";
    case LayerDecision::kSelective:
      return "selective";
    case LayerDecision::kOffload:
      return "offload";
  }
  return "?";
}

Result<Schedule> BuildSingleLevelSchedule(const Profile& profile,
                                          const std::vector<LayerDecision>& decisions,
                                          const std::vector<int>& selective_option) {
  const int L = profile.num_layers();
  if (static_cast<int>(decisions.size()) != L) {
    return Status::Internal("decisions for " + std::to_string(decisions.size()) +
                            " layers, profile has " + std::to_string(L));
  }
  auto in_segment = [&](int i) { return RunsWithoutGrad(decisions[i]); };
  std::vector<int> offloaded;  // checkpoints x[i] to offload
  auto option_of = [&](int i) {
    return i < static_cast<int>(selective_option.size()) && selective_option[i] >= 0
               ? selective_option[i]
               : 0;
  };
  std::vector<Op> ops;
  ops.reserve(4 * L + 1);
  for (int i = 0; i < L; ++i) {
    switch (decisions[i]) {
      case LayerDecision::kKeep:
        ops.push_back(Op::Forward(i, SaveMode::kAll));
        break;
      case LayerDecision::kSelective:
        if (profile.layers[i].selective.empty()) {
          return Status::Invalid("layer " + std::to_string(i) + " ('" + profile.layers[i].name +
                                 "') has no selective option");
        }
        ops.push_back(Op::Forward(i, SaveMode::kSelective, option_of(i)));
        break;
      case LayerDecision::kRecompute:
        if (i == 0 || !in_segment(i - 1)) {
          return Status::Invalid("layer " + std::to_string(i) +
                                 " is marked recompute but does not follow a checkpointed layer");
        }
        [[fallthrough]];
      case LayerDecision::kCheckpoint:
        ops.push_back(Op::Forward(i, SaveMode::kNone));
        break;
      case LayerDecision::kOffload:
        if (i == 0 || !in_segment(i - 1)) {
          return Status::Invalid("layer " + std::to_string(i) + " ('" + profile.layers[i].name +
                                 "') is marked offload but its input is not a checkpoint (the "
                                 "layer before it must run without grad)");
        }
        offloaded.push_back(i);
        ops.push_back(Op::Forward(i, SaveMode::kNone));
        break;
    }
  }
  for (int i = L - 1; i >= 0;) {
    if (!in_segment(i)) {
      ops.push_back(Op::Backward(i));
      --i;
      continue;
    }
    int start = i;
    while (decisions[start] == LayerDecision::kRecompute) --start;
    for (int j = start; j <= i; ++j) ops.push_back(Op::Recompute(j, SaveMode::kAll));
    for (int j = i; j >= start; --j) ops.push_back(Op::Backward(j));
    i = start - 1;
  }
  ops.push_back(Op::OptimizerStep());
  Schedule schedule = AddFrees(ops, L);
  if (offloaded.empty()) return schedule;
  return InsertOffloads(schedule, offloaded, kOffloadPrefetchLead);
}

void SummarizeDecisions(const Schedule& schedule, std::vector<LayerDecision>* decisions,
                        std::vector<int>* selective_option) {
  const int L = schedule.num_layers;
  decisions->assign(L, LayerDecision::kKeep);
  selective_option->assign(L, -1);
  const ChainGraph& graph = ChainGraph::For(L);
  std::vector<char> x_live(L + 1, 0), forwarded(L, 0), nograd(L, 0), offloaded(L, 0);
  x_live[0] = 1;
  for (const Op& op : schedule.ops) {
    if (op.kind == OpKind::kBackward) break;
    if (op.kind == OpKind::kOffload && op.tensor.kind == TensorKind::kX && op.tensor.index < L) {
      offloaded[op.tensor.index] = 1;
      continue;
    }
    if (op.kind == OpKind::kFree) {
      if (op.tensor.kind == TensorKind::kX) x_live[op.tensor.index] = 0;
      continue;
    }
    if (op.kind != OpKind::kForward && op.kind != OpKind::kRecompute) continue;
    for (const TensorRef& t : graph.Writes(op)) {
      if (t.kind == TensorKind::kX) x_live[t.index] = 1;
    }
    if (op.kind != OpKind::kForward || forwarded[op.layer]) continue;
    forwarded[op.layer] = 1;
    if (op.save == SaveMode::kSelective) {
      (*decisions)[op.layer] = LayerDecision::kSelective;
      (*selective_option)[op.layer] = op.option;
    } else if (op.save == SaveMode::kNone) {
      nograd[op.layer] = 1;
    }
  }
  for (int i = 0; i < L; ++i) {
    if (nograd[i]) {
      (*decisions)[i] = offloaded[i] ? LayerDecision::kOffload
                        : x_live[i]  ? LayerDecision::kCheckpoint
                                     : LayerDecision::kRecompute;
    }
  }
}

}  // namespace remat
