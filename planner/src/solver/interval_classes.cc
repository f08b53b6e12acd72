#include "solver/interval_classes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>

namespace remat::solver {
namespace {

// Everything about a layer that the solvers' terms read (the name and kind
// do not matter; backward_ms is the same in every schedule but kept so that
// classes only ever join truly identical layers): its sizes, and its times.
using SizeKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           std::vector<std::tuple<int64_t, int64_t, int64_t>>>;
using LayerKey = std::pair<SizeKey, std::vector<double>>;

SizeKey SizesOf(const LayerProfile& l) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> options;
  for (int k = 0; k < static_cast<int>(l.selective.size()); ++k) {
    const SelectiveOption& o = l.selective[k];
    options.emplace_back(o.activation_bytes, o.recompute_workspace_bytes, l.forward_workspace_for(k));
  }
  return {l.input_bytes, l.output_bytes, l.activation_bytes, l.forward_workspace_bytes,
          l.nograd_workspace_bytes(), l.backward_workspace_bytes, options};
}

// Forward, backward, then each selective option's extra time.
std::vector<double> TimesOf(const LayerProfile& l) {
  std::vector<double> t = {l.forward_ms, l.backward_ms};
  for (const SelectiveOption& o : l.selective) t.push_back(o.extra_recompute_ms);
  return t;
}

LayerKey KeyOf(const LayerProfile& l) { return {SizesOf(l), TimesOf(l)}; }

bool Within(const std::vector<double>& a, const std::vector<double>& ref, double tolerance) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::abs(a[i] - ref[i]) > tolerance * std::abs(ref[i])) return false;
  }
  return true;
}

// A class id per layer: equal layers share one; with a tolerance, so do
// layers of equal sizes whose times are within it of the class's first.
std::vector<int> LayerClasses(const Profile& profile, double time_tolerance) {
  const int L = profile.num_layers();
  std::vector<int> out(L);
  if (time_tolerance <= 0) {
    std::map<LayerKey, int> ids;
    for (int i = 0; i < L; ++i) {
      out[i] = ids.emplace(KeyOf(profile.layers[i]), static_cast<int>(ids.size())).first->second;
    }
    return out;
  }
  std::map<SizeKey, std::vector<std::pair<std::vector<double>, int>>> by_size;
  int next = 0;
  for (int i = 0; i < L; ++i) {
    const std::vector<double> times = TimesOf(profile.layers[i]);
    auto& candidates = by_size[SizesOf(profile.layers[i])];
    int id = -1;
    for (const auto& [ref, cid] : candidates) {
      if (Within(times, ref, time_tolerance)) {
        id = cid;
        break;
      }
    }
    if (id < 0) candidates.push_back({times, id = next++});
    out[i] = id;
  }
  return out;
}

}  // namespace

IntervalClasses::IntervalClasses(const Profile& profile, double time_tolerance)
    : num_layers_(profile.num_layers()) {
  const int L = num_layers_;
  const std::vector<int> layer_class = LayerClasses(profile, time_tolerance);
  const int64_t kinds = L == 0 ? 0 : *std::max_element(layer_class.begin(), layer_class.end()) + 1;
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
