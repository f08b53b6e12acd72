#include "solver/single_level_dp.h"

#include <algorithm>

namespace remat::solver {

SingleLevelDp::SingleLevelDp(const ChainTerms& terms)
    : terms_(terms), num_layers_(terms.num_layers()), keep_all_(KeepAllNeeds(terms)) {
  const int L = num_layers_;
  const int64_t cap = terms.slots() + 1;
  floor_.assign(L + 1, 0);
  lowest_peak_choice_.assign(L, IntervalChoice{});
  lowest_peak_ms_.assign(L + 1, 0);
  for (int s = L - 1; s >= 0; --s) {
    int64_t best = cap;
    IntervalChoice choice;
    double best_ms = 0;
    auto consider = [&](int64_t need, double ms, IntervalChoice c) {
      if (need < best || (need == best && ms < best_ms)) best = need, best_ms = ms, choice = c;
    };
    for (int k = 0; k < terms.num_modes(s); ++k) {
      int64_t need = std::max(terms.ForwardNeed(s, L, k), terms.backward_need(s, k));
      if (s + 1 < L) need = std::max(need, terms.keep(s, k) + floor_[s + 1]);
      consider(need, terms.mode(s, k).extra_ms + lowest_peak_ms_[s + 1], {0, k});
    }
    const std::vector<SweepStep>& sweep = terms.sweep(s);
    for (size_t r = 0; r < sweep.size(); ++r) {
      const int64_t sweep_need = terms.SweepNeed(s, L, sweep[r].bytes);
      if (sweep_need > best) break;
      const int end = r + 1 < sweep.size() ? sweep[r + 1].first_split : L;
      for (int sp = sweep[r].first_split; sp < end; ++sp) {
        const int64_t need = std::max(std::max(sweep_need, terms.x(s) + floor_[sp]),
                                      keep_all_[static_cast<size_t>(s) * (L + 1) + sp]);
        consider(need, terms.ForwardMs(s, sp) + lowest_peak_ms_[sp], {sp, 0});
      }
    }
    floor_[s] = std::min(best, cap);
    lowest_peak_choice_[s] = choice;
    lowest_peak_ms_[s] = best_ms;
  }
}

CostRow SingleLevelDp::Row(int s) const {
  if (s == num_layers_) return CostRow{0, 0, nullptr};
  return CostRow{lo_[s], hi_[s], table_.data() + offset_[s]};
}

REMAT_VECTOR_CLONES
void SingleLevelDp::SolveRow(int s, float* out, DpStats* stats) const {
  const ChainTerms& T = terms_;
  const int L = num_layers_;
  const int lo = lo_[s], hi = hi_[s], n = hi - lo + 1;
  std::fill(out, out + n, kNoFit);
  for (int k = 0; k < T.num_modes(s); ++k) {
    int64_t need = std::max(T.ForwardNeed(s, L, k), T.backward_need(s, k));
    const float extra = static_cast<float>(T.mode(s, k).extra_ms);
    if (s + 1 == L) {
      const int64_t begin = std::max<int64_t>(need, lo);
      if (begin <= hi) MinConst(out + (begin - lo), extra, static_cast<int>(hi - begin + 1));
      continue;
    }
    const CostRow sub = Row(s + 1);
    if (sub.empty()) continue;
    need = std::max(need, T.keep(s, k) + sub.lo);
    if (need > hi) continue;
    MinShifted(out, lo, static_cast<int>(std::max<int64_t>(need, lo)), hi + 1, sub,
               static_cast<int>(T.keep(s, k)), extra);
  }
  const int64_t xs = T.x(s);
  const std::vector<SweepStep>& sweep = T.sweep(s);
  for (size_t r = 0; r < sweep.size(); ++r) {
    const int64_t sweep_need = T.SweepNeed(s, L, sweep[r].bytes);
    if (sweep_need > hi) break;
    const int end = r + 1 < sweep.size() ? sweep[r + 1].first_split : L;
    for (int sp = sweep[r].first_split; sp < end; ++sp) {
      const float fwd = static_cast<float>(T.ForwardMs(s, sp));
      if (fwd >= out[0]) return;
      const CostRow sub = Row(sp);
      if (sub.empty()) continue;
      const int64_t need = std::max(std::max(sweep_need, xs + sub.lo),
                                    keep_all_[static_cast<size_t>(s) * (L + 1) + sp]);
      if (need > hi) continue;
      const int begin = static_cast<int>(std::max<int64_t>(need, lo));
      const int stop = FirstAtMost(out, begin - lo, n, fwd + sub.last()) + lo;
      if (stats != nullptr) {
        stats->split_cells += hi + 1 - begin;
        stats->split_cells_evaluated += std::max(0, stop - begin);
      }
      if (stop > begin) MinShifted(out, lo, begin, stop, sub, static_cast<int>(xs), fwd);
    }
  }
}

IntervalChoice SingleLevelDp::Choose(int s, int64_t m_in) const {
  const ChainTerms& T = terms_;
  const int L = num_layers_;
  // Of the layer lists as fast as the best in m_in slots, take one that
  // needs the fewest: choose at the least m with the same cost.
  const CostRow row = Row(s);
  const int64_t m = row.lo + FirstAtMost(row.cost, 0, static_cast<int>(std::min<int64_t>(m_in, row.hi) - row.lo + 1), row.At(m_in));
  IntervalChoice best;
  float best_cost = kNoFit;
  bool have = false;
  for (int k = 0; k < T.num_modes(s); ++k) {
    if (std::max(T.ForwardNeed(s, L, k), T.backward_need(s, k)) > m) continue;
    float cost = static_cast<float>(T.mode(s, k).extra_ms);
    if (s + 1 < L) {
      const CostRow sub = Row(s + 1);
      const int64_t left = m - T.keep(s, k);
      if (sub.empty() || left < sub.lo) continue;
      cost = cost + sub.At(left);
    }
    if (!have || cost < best_cost) best = {0, k}, best_cost = cost, have = true;
  }
  const std::vector<SweepStep>& sweep = T.sweep(s);
  for (size_t r = 0; r < sweep.size(); ++r) {
    if (T.SweepNeed(s, L, sweep[r].bytes) > m) break;
    const int end = r + 1 < sweep.size() ? sweep[r + 1].first_split : L;
    for (int sp = sweep[r].first_split; sp < end; ++sp) {
      const CostRow sub = Row(sp);
      if (sub.empty() || m - T.x(s) < sub.lo ||
          keep_all_[static_cast<size_t>(s) * (L + 1) + sp] > m) {
        continue;
      }
      const float cost = static_cast<float>(T.ForwardMs(s, sp)) + sub.At(m - T.x(s));
      if (!have || cost < best_cost) best = {sp, 0}, best_cost = cost, have = true;
    }
  }
  return best;
}

template <typename ChooseFn>
SingleLevelSolution SingleLevelDp::Walk(int64_t slots, const ChooseFn& choose) const {
  const int L = num_layers_;
  SingleLevelSolution out;
  out.decisions.assign(L, LayerDecision::kKeep);
  out.selective_option.assign(L, -1);
  for (int s = 0; s < L;) {
    const IntervalChoice c = choose(s, slots);
    if (c.split == 0) {
      const KeepMode& mode = terms_.mode(s, c.mode);
      if (mode.save == SaveMode::kSelective) {
        out.decisions[s] = LayerDecision::kSelective;
        out.selective_option[s] = mode.option;
      }
      slots -= terms_.keep(s, c.mode);
      ++s;
    } else {
      out.decisions[s] = LayerDecision::kCheckpoint;
      for (int j = s + 1; j < c.split; ++j) out.decisions[j] = LayerDecision::kRecompute;
      slots -= terms_.x(s);
      s = c.split;
    }
  }
  return out;
}

SingleLevelSolution SingleLevelDp::LowestPeak() const {
  SingleLevelSolution out =
      Walk(0, [this](int s, int64_t) { return lowest_peak_choice_[s]; });
  out.recompute_ms = lowest_peak_ms_[0];
  return out;
}

std::optional<SingleLevelSolution> SingleLevelDp::Solve(DpStats* stats) {
  const int L = num_layers_;
  const int64_t M = terms_.slots();
  lo_.assign(L, 1);
  hi_.assign(L, 0);
  offset_.assign(L, 0);
  int64_t cells = 0;
  for (int s = 0; s < L; ++s) {
    offset_[s] = cells;
    if (floor_[s] > M) continue;
    lo_[s] = static_cast<int>(floor_[s]);
    hi_[s] = static_cast<int>(std::min(M, keep_all_[static_cast<size_t>(s) * (L + 1) + L]));
    cells += hi_[s] - lo_[s] + 1;
  }
  if (stats != nullptr) {
    *stats = DpStats{};
    stats->slots = M;
    stats->slot_bytes = terms_.units().slot_bytes();
    stats->table_cells = cells;
    stats->memory_bytes = cells * static_cast<int64_t>(sizeof(float)) +
                          static_cast<int64_t>(keep_all_.size() * sizeof(int64_t));
  }
  if (floor_[0] > M) return std::nullopt;
  table_.assign(cells, kNoFit);
  for (int s = L - 1; s >= 0; --s) {
    if (lo_[s] <= hi_[s]) SolveRow(s, table_.data() + offset_[s], stats);
  }
  return Reconstruct(M);
}

SingleLevelSolution SingleLevelDp::Reconstruct(int64_t slots) const {
  SingleLevelSolution out = Walk(slots, [this](int s, int64_t m) { return Choose(s, m); });
  out.recompute_ms = Row(0).At(slots);
  return out;
}

}  // namespace remat::solver
