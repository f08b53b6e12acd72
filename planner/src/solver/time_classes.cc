#include "solver/time_classes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace remat::solver {
namespace {

// |t - t_ref| <= tolerance * t_ref for every time.
bool Agree(const std::vector<double>& t, const std::vector<double>& ref, double tolerance) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (std::abs(t[i] - ref[i]) > tolerance * ref[i]) return false;
  }
  return true;
}

void SetTimes(const std::vector<double>& t, LayerProfile* l) {
  l->forward_ms = t[0];
  l->backward_ms = t[1];
  for (size_t k = 0; k < l->selective.size(); ++k) l->selective[k].extra_recompute_ms = t[2 + k];
}

}  // namespace

LayerSizes SizesOf(const LayerProfile& l) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> options;
  for (int k = 0; k < static_cast<int>(l.selective.size()); ++k) {
    const SelectiveOption& o = l.selective[k];
    options.emplace_back(o.activation_bytes, o.recompute_workspace_bytes,
                         l.forward_workspace_for(k));
  }
  return {l.input_bytes,
          l.output_bytes,
          l.activation_bytes,
          l.forward_workspace_bytes,
          l.nograd_workspace_bytes(),
          l.backward_workspace_bytes,
          l.gradient_bytes,
          l.keeps_input ? 1 : 0,
          options};
}

std::vector<double> TimesOf(const LayerProfile& l) {
  std::vector<double> t = {l.forward_ms, l.backward_ms};
  for (const SelectiveOption& o : l.selective) t.push_back(o.extra_recompute_ms);
  return t;
}

double TimeClasses::cost_bound() const {
  return deviation < 1 ? (1 + deviation) / (1 - deviation)
                       : std::numeric_limits<double>::infinity();
}

TimeClasses PoolTimesBySpread(const Profile& profile) {
  TimeClasses out;
  out.profile = profile;
  out.layers = profile.num_layers();
  const int L = out.layers;
  // Classes by sizes; each holds its reference layer and its members.
  struct Class {
    int reference;
    std::vector<int> members;
    std::vector<double> times;  // the reference layer's
  };
  std::vector<Class> classes;
  std::map<LayerSizes, std::vector<int>> by_sizes;  // sizes -> class indices
  for (int i = 0; i < L; ++i) {
    const LayerProfile& l = profile.layers[i];
    const std::vector<double> times = TimesOf(l);
    std::vector<int>& candidates = by_sizes[SizesOf(l)];
    int joined = -1;
    for (int c : candidates) {
      const LayerProfile& ref = profile.layers[classes[c].reference];
      if (Agree(times, classes[c].times, std::min(l.time_spread, ref.time_spread))) {
        joined = c;
        break;
      }
    }
    if (joined < 0) {
      joined = static_cast<int>(classes.size());
      classes.push_back({i, {}, times});
      candidates.push_back(joined);
    }
    classes[joined].members.push_back(i);
  }
  for (const Class& c : classes) {
    const std::vector<double>& reference = c.times;
    std::vector<double> mean(reference.size(), 0);
    bool equal = true;
    for (int i : c.members) {
      const std::vector<double> t = TimesOf(profile.layers[i]);
      equal = equal && t == reference;
      for (size_t k = 0; k < t.size(); ++k) mean[k] += t[k];
    }
    if (equal) continue;  // identical layers (spread 0 included): nothing to pool
    for (double& m : mean) m /= static_cast<double>(c.members.size());
    for (int i : c.members) {
      const std::vector<double> t = TimesOf(profile.layers[i]);
      if (t == mean) continue;
      ++out.pooled_layers;
      for (size_t k = 0; k < t.size(); ++k) {
        if (mean[k] > 0)
          out.deviation = std::max(out.deviation, std::abs(t[k] - mean[k]) / mean[k]);
      }
      SetTimes(mean, &out.profile.layers[i]);
    }
  }
  std::set<std::pair<LayerSizes, std::vector<double>>> distinct;
  for (const LayerProfile& l : out.profile.layers) distinct.emplace(SizesOf(l), TimesOf(l));
  out.classes = static_cast<int>(distinct.size());
  return out;
}

}  // namespace remat::solver
