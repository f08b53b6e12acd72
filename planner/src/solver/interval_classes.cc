#include "solver/interval_classes.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "solver/time_classes.h"

namespace remat::solver {
namespace {

// Everything about a layer that the solvers' terms read (the name and kind
// do not matter; backward_ms is the same in every schedule but kept so that
// classes only ever join truly identical layers): its sizes, and its times.
using LayerKey = std::pair<LayerSizes, std::vector<double>>;

// A class id per layer: equal layers share one.
std::vector<int> LayerClasses(const Profile& profile) {
  std::map<LayerKey, int> ids;
  std::vector<int> out(profile.num_layers());
  for (int i = 0; i < profile.num_layers(); ++i) {
    const LayerProfile& l = profile.layers[i];
    out[i] =
        ids.emplace(LayerKey(SizesOf(l), TimesOf(l)), static_cast<int>(ids.size())).first->second;
  }
  return out;
}

}  // namespace

IntervalClasses::IntervalClasses(const Profile& profile, GradientKey key)
    : num_layers_(profile.num_layers()) {
  const int L = num_layers_;
  const std::vector<int> layer_class = LayerClasses(profile);
  const int64_t kinds = L == 0 ? 0 : *std::max_element(layer_class.begin(), layer_class.end()) + 1;
  // Parameter gradients created in backward (LayerProfile::gradient_bytes)
  // live from their layer's backward to the optimizer step, so those of
  // layers t..L-1 are live throughout interval (s, t)'s backwards
  // (ChainTerms' backward peaks): intervals of equal layers share a row
  // only when the gradients after them are equal too. By value, interned.
  // With GradientKey::kShifted they are left out of the key (read as a
  // shift instead).
  std::vector<int> after(L + 1, 0);
  gradients_after_.assign(L + 1, 0);
  {
    std::map<int64_t, int> ids;
    int64_t bytes = 0;
    for (int t = L; t >= 0; --t) {
      if (t < L) bytes += profile.layers[t].gradient_bytes;
      gradients_after_[t] = bytes;
      if (key == GradientKey::kExact) {
        after[t] = ids.emplace(bytes, static_cast<int>(ids.size())).first->second;
      }
    }
  }
  const int64_t afters = L + 1;
  // Sequences s..t-1 are interned as (sequence s..t-2, layer t-1); the
  // class adds the two end flags and the gradients after t.
  std::unordered_map<int64_t, int> sequences, classes;
  // (At most one of each per interval: never rehashed.)
  sequences.reserve(static_cast<size_t>(L) * (L + 1) / 2);
  classes.reserve(static_cast<size_t>(L) * (L + 1) / 2);
  class_.assign(static_cast<size_t>(L + 1) * (L + 1), -1);
  class_by_t_.assign(class_.size(), -1);
  for (int s = 0; s < L; ++s) {
    int64_t seq = -1;
    for (int t = s + 1; t <= L; ++t) {
      const int64_t key = (seq + 1) * kinds + layer_class[t - 1];
      seq = sequences.try_emplace(key, static_cast<int>(sequences.size())).first->second;
      const int64_t flags = (s == 0 ? 1 : 0) + (t == L ? 2 : 0);
      const int64_t class_key = (seq * 4 + flags) * afters + after[t];
      const int id = classes.try_emplace(class_key, static_cast<int>(classes.size())).first->second;
      if (id == static_cast<int>(canonical_s_.size())) {
        canonical_s_.push_back(s);
        canonical_t_.push_back(t);
      }
      // s increases: the last member seen ends last.
      canonical_s_[id] = s;
      canonical_t_[id] = t;
      class_[static_cast<size_t>(s) * (L + 1) + t] = id;
      class_by_t_[static_cast<size_t>(t) * (L + 1) + s] = id;
    }
  }
  count_ = static_cast<int>(classes.size());
}

}  // namespace remat::solver
