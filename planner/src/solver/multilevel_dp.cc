#include "solver/multilevel_dp.h"

#include <algorithm>

#include "solver/op_emitter.h"

namespace remat::solver {

MultiLevelDp::MultiLevelDp(const ChainTerms& terms)
    : terms_(terms), num_layers_(terms.num_layers()), bounds_(terms, /*track_choices=*/false) {
  const int L = num_layers_;
  const int64_t M = terms.slots();
  const size_t n = static_cast<size_t>(L + 1) * (L + 1);
  lo_.assign(n, 1);
  hi_.assign(n, 0);
  offset_.assign(n, 0);
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      const size_t i = Index(s, t);
      offset_[i] = table_cells_;
      if (bounds_.floor(s, t) > M) continue;
      lo_[i] = static_cast<int>(bounds_.floor(s, t));
      hi_[i] = static_cast<int>(std::min(M, bounds_.keep_all(s, t)));
      table_cells_ += hi_[i] - lo_[i] + 1;
    }
  }
}

CostRow MultiLevelDp::Row(int s, int t) const {
  const size_t i = Index(s, t);
  return CostRow{lo_[i], hi_[i], table_.data() + offset_[i]};
}

REMAT_VECTOR_CLONES
void MultiLevelDp::SolveInterval(int s, int t, float* out, DpStats* stats) const {
  const ChainTerms& T = terms_;
  const int lo = lo_[Index(s, t)], hi = hi_[Index(s, t)];
  const int n = hi - lo + 1;
  std::fill(out, out + n, kNoFit);

  // Keep layer s under each mode.
  for (int k = 0; k < T.num_modes(s); ++k) {
    int64_t need = std::max(T.ForwardNeed(s, t, k), T.backward_need(s, k));
    const float extra = static_cast<float>(T.mode(s, k).extra_ms);
    if (t == s + 1) {
      if (need <= hi) MinConst(out + (std::max<int64_t>(need, lo) - lo), extra, static_cast<int>(hi - std::max<int64_t>(need, lo) + 1));
      continue;
    }
    const CostRow sub = Row(s + 1, t);
    if (sub.empty()) continue;
    const int64_t keep = T.keep(s, k);
    need = std::max(need, keep + sub.lo);
    if (need > hi) continue;
    const int begin = static_cast<int>(std::max<int64_t>(need, lo));
    MinShifted(out, lo, begin, hi + 1, sub, static_cast<int>(keep), extra);
  }

  // Split at s': sweep s..s'-1 without grad, then (s', t), then (s, s').
  const int64_t xs = T.x(s);
  const std::vector<SweepStep>& sweep = T.sweep(s);
  for (size_t r = 0; r < sweep.size() && sweep[r].first_split < t; ++r) {
    const int64_t sweep_need = T.SweepNeed(s, t, sweep[r].bytes);
    if (sweep_need > hi) break;  // later steps peak higher still
    const int end = r + 1 < sweep.size() ? std::min(sweep[r + 1].first_split, t) : t;
    for (int sp = sweep[r].first_split; sp < end; ++sp) {
      const float fwd = static_cast<float>(T.ForwardMs(s, sp));
      if (fwd >= out[0]) return;  // out[0] is the row's maximum; fwd grows with s'
      const CostRow right = Row(sp, t), left = Row(s, sp);
      if (right.empty() || left.empty()) continue;
      const int64_t need = std::max(sweep_need, std::max(xs + right.lo, int64_t{left.lo}));
      if (need > hi) continue;
      const int begin = static_cast<int>(std::max<int64_t>(need, lo));
      if (stats != nullptr) ++stats->splits_total;
      // Only m whose cost exceeds the split's lower bound can improve.
      const float bound = (fwd + right.last()) + left.last();
      const int stop = FirstAtMost(out, begin - lo, n, bound) + lo;
      if (stop <= begin) continue;
      if (stats != nullptr) {
        ++stats->splits_evaluated;
        stats->cells_updated += stop - begin;
      }
      MinShifted2(out, lo, begin, stop, right, static_cast<int>(xs), left, fwd);
    }
  }
}

IntervalChoice MultiLevelDp::Choose(int s, int t, int64_t m_in) const {
  const ChainTerms& T = terms_;
  const int64_t m = std::min<int64_t>(m_in, hi_[Index(s, t)]);
  IntervalChoice best;
  float best_cost = kNoFit;
  bool have = false;
  for (int k = 0; k < T.num_modes(s); ++k) {
    if (std::max(T.ForwardNeed(s, t, k), T.backward_need(s, k)) > m) continue;
    float cost = static_cast<float>(T.mode(s, k).extra_ms);
    if (t > s + 1) {
      const CostRow sub = Row(s + 1, t);
      const int64_t left = m - T.keep(s, k);
      if (sub.empty() || left < sub.lo) continue;
      cost = cost + sub.At(left);
    }
    if (!have || cost < best_cost) best = {0, k}, best_cost = cost, have = true;
  }
  const int64_t xs = T.x(s);
  const std::vector<SweepStep>& sweep = T.sweep(s);
  for (size_t r = 0; r < sweep.size() && sweep[r].first_split < t; ++r) {
    if (T.SweepNeed(s, t, sweep[r].bytes) > m) break;
    const int end = r + 1 < sweep.size() ? std::min(sweep[r + 1].first_split, t) : t;
    for (int sp = sweep[r].first_split; sp < end; ++sp) {
      const CostRow right = Row(sp, t), left = Row(s, sp);
      if (right.empty() || left.empty() || m - xs < right.lo || m < left.lo) continue;
      const float cost = (static_cast<float>(T.ForwardMs(s, sp)) + right.At(m - xs)) + left.At(m);
      if (!have || cost < best_cost) best = {sp, 0}, best_cost = cost, have = true;
    }
  }
  return best;
}

std::optional<DpSolution> MultiLevelDp::Solve(DpStats* stats) {
  const int L = num_layers_;
  if (stats != nullptr) {
    *stats = DpStats{};
    stats->slots = terms_.slots();
    stats->slot_bytes = terms_.units().slot_bytes();
    stats->table_cells = table_cells_;
    stats->memory_bytes = table_bytes() + bounds_.memory_bytes() +
                          static_cast<int64_t>(lo_.size() * 2 * sizeof(int) + offset_.size() * sizeof(int64_t));
  }
  const CostRow whole{lo_[Index(0, L)], hi_[Index(0, L)], nullptr};
  if (whole.empty()) return std::nullopt;
  table_.assign(table_cells_, kNoFit);
  for (int s = L - 1; s >= 0; --s) {
    for (int t = s + 1; t <= L; ++t) {
      const size_t i = Index(s, t);
      if (lo_[i] <= hi_[i]) SolveInterval(s, t, table_.data() + offset_[i], stats);
    }
  }
  DpSolution solution;
  solution.recompute_ms = Row(0, L).At(terms_.slots());
  OpEmitter emitter(L);
  EmitInterval(terms_, 0, L, terms_.slots(),
               [this](int s, int t, int64_t m) { return Choose(s, t, m); }, &emitter);
  solution.ops = emitter.Finish();
  return solution;
}

}  // namespace remat::solver
