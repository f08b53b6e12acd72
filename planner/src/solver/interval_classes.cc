#include "solver/interval_classes.h"

#include <map>
#include <tuple>
#include <unordered_map>

namespace remat::solver {
namespace {

// Everything about a layer that the solvers' terms read (the name and kind
// do not matter; backward_ms is the same in every schedule but kept so that
// classes only ever join truly identical layers).
using LayerKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double,
                            std::vector<std::tuple<int64_t, double, int64_t>>>;

LayerKey KeyOf(const LayerProfile& l) {
  std::vector<std::tuple<int64_t, double, int64_t>> options;
  for (const SelectiveOption& o : l.selective) {
    options.emplace_back(o.activation_bytes, o.extra_recompute_ms, o.recompute_workspace_bytes);
  }
  return {l.input_bytes, l.output_bytes, l.activation_bytes, l.forward_workspace_bytes,
          l.nograd_workspace_bytes(), l.backward_workspace_bytes, l.forward_ms, l.backward_ms,
          options};
}

}  // namespace

IntervalClasses::IntervalClasses(const Profile& profile) : num_layers_(profile.num_layers()) {
  const int L = num_layers_;
  std::map<LayerKey, int> layer_ids;
  std::vector<int> layer_class(L);
  for (int i = 0; i < L; ++i) {
    layer_class[i] = layer_ids.emplace(KeyOf(profile.layers[i]), static_cast<int>(layer_ids.size()))
                         .first->second;
  }
  const int64_t kinds = static_cast<int64_t>(layer_ids.size());
  // Sequences s..t-1 are interned as (sequence s..t-2, layer t-1); the
  // class adds the two end flags.
  std::unordered_map<int64_t, int> sequences, classes;
  class_.assign(static_cast<size_t>(L + 1) * (L + 1), -1);
  class_by_t_.assign(class_.size(), -1);
  for (int s = 0; s < L; ++s) {
    int64_t seq = -1;
    for (int t = s + 1; t <= L; ++t) {
      const int64_t key = (seq + 1) * kinds + layer_class[t - 1];
      seq = sequences.emplace(key, static_cast<int>(sequences.size())).first->second;
      const int64_t flags = (s == 0 ? 1 : 0) + (t == L ? 2 : 0);
      const int id = classes.emplace(seq * 4 + flags, static_cast<int>(classes.size())).first->second;
      class_[static_cast<size_t>(s) * (L + 1) + t] = id;
      class_by_t_[static_cast<size_t>(t) * (L + 1) + s] = id;
    }
  }
  count_ = static_cast<int>(classes.size());
}

}  // namespace remat::solver
