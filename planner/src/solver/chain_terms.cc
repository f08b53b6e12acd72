#include "solver/chain_terms.h"

#include <algorithm>
#include <map>
#include <utility>

namespace remat::solver {

int64_t RecurringKeepBytes(const Profile& profile) {
  std::map<int64_t, int> count;
  for (const LayerProfile& l : profile.layers) {
    ++count[l.input_bytes + l.activation_bytes - l.output_bytes];
  }
  int64_t bytes = 0;
  int most = 1;
  for (const auto& [b, n] : count) {
    if (n > most) bytes = b, most = n;
  }
  return bytes;
}

ChainSweeps::ChainSweeps(const Profile& profile) {
  const int L = profile.num_layers();
  const auto& layers = profile.layers;
  // |x[i]|, i in [0, L] (as ChainTerms' x_bytes).
  std::vector<int64_t> x(L + 1);
  x[0] = layers[0].input_bytes;
  for (int i = 0; i < L; ++i) x[i + 1] = layers[i].output_bytes;
  // Sweep from s: forward j reads x[j] (held as x[s] when j == s) and writes
  // x[j+1]; x[j] (j > s) is freed right after. Inside backward each forward
  // also holds its layer's recompute gather (another recompute follows it).
  for (const LayerProfile& l : layers) gathers = gathers || l.recompute_gather_bytes > 0;
  for (const bool backward : {false, true}) {
    if (backward && !gathers) break;
    auto& sweeps = steps[backward];
    auto& of = step_of[backward];
    sweeps.resize(L);
    of.resize(L);
    for (int s = 0; s < L; ++s) {
      of[s].reserve(std::max(0, L - s - 1));
      int64_t peak = -1;
      for (int j = s; j + 1 < L; ++j) {
        const int64_t here = (j > s ? x[j] : 0) + x[j + 1] + layers[j].nograd_workspace_bytes() +
                             (backward ? layers[j].recompute_gather_bytes : 0);
        if (here > peak) {
          peak = here;
          sweeps[s].push_back({j + 1, peak});
        }
        of[s].push_back(static_cast<int>(sweeps[s].size()) - 1);
      }
    }
  }
}

ChainTerms::ChainTerms(const Profile& profile, const MemoryUnits& units,
                       std::shared_ptr<const ChainSweeps> sweeps)
    : profile_(profile), units_(units), num_layers_(profile.num_layers()) {
  const int L = num_layers_;
  const auto& layers = profile.layers;
  x_bytes_.assign(L + 1, 0);
  g_bytes_.assign(L + 1, 0);
  x_bytes_[0] = layers[0].input_bytes;
  for (int i = 0; i < L; ++i) x_bytes_[i + 1] = layers[i].output_bytes;
  for (int i = 1; i < L; ++i) g_bytes_[i] = layers[i].input_bytes;
  x_slots_.resize(L + 1);
  for (int i = 0; i <= L; ++i) x_slots_[i] = units_.Slots(x_bytes_[i]);

  mode_begin_.assign(L + 1, 0);
  for (int s = 0; s < L; ++s) {
    const LayerProfile& l = layers[s];
    mode_begin_[s] = static_cast<int>(modes_.size());
    modes_.push_back(
        {SaveMode::kAll, -1, l.activation_bytes - l.output_bytes, 0, 0, l.forward_workspace_bytes});
    for (size_t k = 0; k < l.selective.size(); ++k) {
      const SelectiveOption& o = l.selective[k];
      modes_.push_back({SaveMode::kSelective, static_cast<int>(k),
                        o.activation_bytes - l.output_bytes, o.recompute_workspace_bytes,
                        o.extra_recompute_ms, l.forward_workspace_for(static_cast<int>(k))});
    }
  }
  mode_begin_[L] = static_cast<int>(modes_.size());
  // Parameter gradients created in backward: during backward s, those of
  // layers s..L-1 exist.
  std::vector<int64_t>& grads_from = grads_from_;
  grads_from.assign(L + 1, 0);
  for (int s = L - 1; s >= 0; --s) grads_from[s] = grads_from[s + 1] + layers[s].gradient_bytes;
  for (int s = 0; s < L; ++s) {
    const LayerProfile& l = layers[s];
    // A layer that does not keep its input releases it after its forward
    // (when its producer ran with grad: kept, the usual case here).
    const int64_t input = l.keeps_input ? x_bytes_[s] : 0;
    for (int k = 0; k < num_modes(s); ++k) {
      const KeepMode& m = mode(s, k);
      keep_slots_.push_back(units_.Slots(input + m.kept_bytes));
      keep_held_slots_.push_back(units_.Slots(x_bytes_[s] + m.kept_bytes));
      // Backward s does not hold x[s+1] (chain_graph.h), but for the loss's.
      const int64_t output = s + 1 < L ? 0 : x_bytes_[s + 1];
      // A layer's backward after a recompute may have a workspace of its own
      // (LayerProfile::recompute_backward_workspace_bytes): the larger one,
      // as the terms do not tell a recomputed a[s] from a kept one.
      // Below zero, what autograd released of a[s] before the peak: at most
      // a[s] (Replay::StepBackward).
      const int64_t workspace = std::max(
          std::max(l.backward_workspace_bytes, l.backward_workspace_for(m.save == SaveMode::kAll)) +
              m.recompute_workspace_bytes,
          -m.kept_bytes);
      const int64_t rest =
          output + m.kept_bytes + g_bytes_[s + 1] + g_bytes_[s] + workspace + grads_from[s];
      backward_held_slots_.push_back(units_.Slots(x_bytes_[s] + rest));
      backward_slots_.push_back(units_.Slots(input + rest));
    }
  }

  sweeps_ = sweeps != nullptr ? std::move(sweeps) : std::make_shared<const ChainSweeps>(profile);

  for (int s = 0; s < L; ++s) {
    for (int k = 0; k < num_modes(s); ++k) {
      forward_bytes_.push_back(x_bytes_[s] + x_bytes_[s + 1] + mode(s, k).kept_bytes +
                               mode(s, k).forward_workspace_bytes);
    }
    recompute_gather_bytes_.push_back(layers[s].recompute_gather_bytes);
  }
  after_bytes_.resize(L + 1);
  for (int t = 0; t <= L; ++t) after_bytes_[t] = g_bytes_[t] + grads_from_[t];

  forward_prefix_.assign(L + 1, 0);
  for (int i = 0; i < L; ++i) forward_prefix_[i + 1] = forward_prefix_[i] + layers[i].forward_ms;
}

}  // namespace remat::solver
