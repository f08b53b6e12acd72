#include "layer_rows.h"

#include <map>
#include <utility>

namespace remat::viz {
namespace {

// The bytes of tensor `t` as written by `op` (x: the writer's output; a: what
// it keeps besides its output), as the simulator counts them.
int64_t WrittenBytes(const Profile& p, const Op& op, TensorRef t) {
  const LayerProfile& l = p.layers[op.layer];
  if (t.kind == TensorKind::kX) return l.output_bytes;
  if (t.kind != TensorKind::kA) return 0;
  const int64_t kept = op.save == SaveMode::kSelective ? l.selective[op.option].activation_bytes
                                                       : l.activation_bytes;
  return kept - l.output_bytes;
}

}  // namespace

std::vector<LayerRow> LayerRows(const Plan& plan, const Profile& profile) {
  const int n = profile.num_layers();
  std::vector<LayerRow> rows(n);
  for (int i = 0; i < n; ++i) {
    const LayerProfile& l = profile.layers[i];
    LayerRow& r = rows[i];
    r.index = i;
    r.name = l.name;
    r.decision = plan.decisions[i];
    const int option = plan.selective_option[i];
    if (option >= 0) r.option = l.selective[option].name;
    r.at_peak_bytes = plan.predicted.layer_bytes_at_peak[i];
  }
  const ChainGraph& graph = ChainGraph::For(n);
  std::map<int, std::pair<int, int64_t>> first_forward_live;  // tensor -> (layer, bytes)
  std::vector<int> a_option(n, -1);  // selective option a[i] was last written under
  bool backward_started = false;
  for (const Op& op : plan.schedule.ops) {
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kRecompute: {
        LayerRow& r = rows[op.layer];
        const bool first = op.kind == OpKind::kForward;
        (first ? r.forward_ms : r.recompute_ms) += profile.layers[op.layer].forward_ms;
        if (op.save != SaveMode::kNone) {  // writes a[layer]
          a_option[op.layer] = op.save == SaveMode::kSelective ? op.option : -1;
        }
        for (const TensorRef& t : graph.Writes(op)) {
          const int64_t bytes = WrittenBytes(profile, op, t);
          if (!first) {
            r.recomputed_bytes += bytes;
          } else if (!backward_started) {
            first_forward_live[graph.TensorIndex(t)] = {op.layer, bytes};
          }
        }
        break;
      }
      case OpKind::kBackward: {
        if (!backward_started) {
          for (const auto& [key, owner] : first_forward_live) {
            rows[owner.first].kept_bytes += owner.second;
          }
          backward_started = true;
        }
        const LayerProfile& l = profile.layers[op.layer];
        LayerRow& r = rows[op.layer];
        r.backward_ms += l.backward_ms;
        if (a_option[op.layer] >= 0) {
          const SelectiveOption& o = l.selective[a_option[op.layer]];
          r.recompute_ms += o.extra_recompute_ms;
          r.recomputed_bytes += l.activation_bytes - o.activation_bytes;
        }
        break;
      }
      case OpKind::kFree:
        if (!backward_started) first_forward_live.erase(graph.TensorIndex(op.tensor));
        break;
      case OpKind::kOptimizerStep:
      case OpKind::kOffload:
      case OpKind::kPrefetch:
        break;
    }
  }
  return rows;
}

}  // namespace remat::viz
