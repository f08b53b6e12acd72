#include "solver/interval_bounds.h"

#include <algorithm>
#include <cstdint>

#include "solver/cost_row.h"

namespace remat::solver {
namespace {

// The least of max(xs + col[sp], row[sp]) over sp in [begin, end), and
// `least` where that is less: the fewest slots a split at any of those sp
// needs besides its sweep (on the widest vector unit).
REMAT_VECTOR_CLONES
int64_t LeastSplitNeed(const int64_t* __restrict col, const int64_t* __restrict row, int64_t xs,
                       int begin, int end, int64_t least) {
  for (int sp = begin; sp < end; ++sp) least = std::min(least, std::max(xs + col[sp], row[sp]));
  return least;
}

}  // namespace

std::vector<int64_t> KeepAllNeeds(const ChainTerms& terms) {
  const int L = terms.num_layers();
  const int64_t cap = terms.slots() + 1;
  std::vector<int64_t> need(static_cast<size_t>(L + 1) * (L + 1), cap);
  for (int s = L - 1; s >= 0; --s) {
    const int64_t own = terms.backward_need(s, 0);
    for (int t = s + 1; t <= L; ++t) {
      int64_t n = std::max(terms.ForwardNeed(s, t, 0), own);
      if (t > s + 1) n = std::max(n, terms.keep(s, 0) + need[static_cast<size_t>(s + 1) * (L + 1) + t]);
      need[static_cast<size_t>(s) * (L + 1) + t] = std::min(n, cap);
    }
  }
  return need;
}

IntervalBounds::IntervalBounds(const ChainTerms& terms, const IntervalClasses& classes,
                               bool track_choices)
    : num_layers_(terms.num_layers()) {
  const size_t n = static_cast<size_t>(num_layers_ + 1) * (num_layers_ + 1);
  const int64_t cap = terms.slots() + 1;
  floor_.assign(n, cap);
  floor_by_t_.assign(n, cap);
  keep_all_ = KeepAllNeeds(terms);
  if (track_choices) {
    choice_.assign(n, 0);
    time_ms_.assign(n, 0);
    Compute<true>(terms, classes);
  } else {
    Compute<false>(terms, classes);
  }
}

template <bool kTrack>
void IntervalBounds::Compute(const ChainTerms& terms, const IntervalClasses& classes) {
  const int L = num_layers_;
  const int64_t cap = terms.slots() + 1;
  // The first interval of each class in this order (its canonical one)
  // stands for all of it.
  std::vector<size_t> solved(classes.count(), SIZE_MAX);
  for (int s = L - 1; s >= 0; --s) {
    const int64_t xs = terms.x(s);
    const int64_t* row = &floor_[Index(s, 0)];
    for (int t = s + 1; t <= L; ++t) {
      const std::vector<SweepStep>& sweep = terms.sweep(s, t);
      const size_t here = Index(s, t);
      size_t& first = solved[classes.of(s, t)];
      if (first != SIZE_MAX) {
        // The class's canonical interval (it ends last, so it comes first
        // here), shifted by the gradients after (s, t) beyond its own.
        const int64_t shift = terms.units().Slots(classes.shift_bytes(s, t));
        floor_[here] = floor_by_t_[Index(t, s)] = std::min(cap, floor_[first] + shift);
        if constexpr (kTrack) choice_[here] = choice_[first], time_ms_[here] = time_ms_[first];
        continue;
      }
      first = here;
      int64_t best = cap;
      int best_choice = 0;
      double best_ms = 0;
      // Keep layer s (any mode), then (s+1, t).
      for (int k = 0; k < terms.num_modes(s); ++k) {
        int64_t need = std::max(terms.ForwardNeed(s, t, k), terms.backward_need(s, k));
        if (t > s + 1) need = std::max(need, terms.keep(s, k) + floor(s + 1, t));
        if constexpr (kTrack) {
          const double ms = terms.mode(s, k).extra_ms + (t > s + 1 ? time_ms_[Index(s + 1, t)] : 0);
          if (need < best || (need == best && ms < best_ms)) {
            best = need;
            best_choice = -k;
            best_ms = ms;
          }
        } else {
          best = std::min(best, need);
        }
      }
      // Split at s': sweep s..s'-1, then (s', t) next to x[s], then (s, s').
      const int64_t* col = &floor_by_t_[Index(t, 0)];
      for (size_t r = 0; r < sweep.size() && sweep[r].first_split < t; ++r) {
        const int64_t sweep_need = terms.SweepNeed(s, t, sweep[r].bytes);
        if (sweep_need > best || (!kTrack && sweep_need == best)) break;  // later steps peak higher
        const int end = r + 1 < sweep.size() ? std::min(sweep[r + 1].first_split, t) : t;
        if constexpr (kTrack) {
          for (int sp = sweep[r].first_split; sp < end; ++sp) {
            const int64_t need = std::max(sweep_need, std::max(xs + col[sp], row[sp]));
            const double ms = terms.ForwardMs(s, sp) + time_ms_[Index(sp, t)] + time_ms_[Index(s, sp)];
            if (need < best || (need == best && ms < best_ms)) {
              best = need;
              best_choice = sp - s;
              best_ms = ms;
            }
          }
        } else {
          const int64_t inner = LeastSplitNeed(col, row, xs, sweep[r].first_split, end, cap);
          best = std::min(best, std::max(sweep_need, inner));
        }
      }
      best = std::min(best, cap);
      floor_[here] = best;
      floor_by_t_[Index(t, s)] = best;
      if constexpr (kTrack) {
        choice_[here] = best_choice;
        time_ms_[here] = best_ms;
      }
    }
  }
}

IntervalChoice IntervalBounds::LowestPeakChoice(int s, int t) const {
  const int c = choice_[Index(s, t)];
  return c > 0 ? IntervalChoice{s + c, 0} : IntervalChoice{0, -c};
}

int64_t IntervalBounds::memory_bytes() const {
  return static_cast<int64_t>((floor_.size() + floor_by_t_.size() + keep_all_.size()) *
                                  sizeof(int64_t) +
                              choice_.size() * sizeof(int) + time_ms_.size() * sizeof(double));
}

}  // namespace remat::solver
