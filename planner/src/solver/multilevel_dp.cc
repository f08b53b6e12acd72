#include "solver/multilevel_dp.h"

#include <algorithm>

#include "solver/op_emitter.h"

namespace remat::solver {
namespace {

// Rows per tile of the solve order (see Solve).
constexpr int kTileRows = 32;

}  // namespace

MultiLevelDp::MultiLevelDp(const ChainTerms& terms)
    : terms_(terms),
      num_layers_(terms.num_layers()),
      classes_(terms.profile()),
      bounds_(terms, classes_, /*track_choices=*/false) {
  const int L = num_layers_;
  const int64_t M = terms.slots();
  rows_.assign(classes_.count(), RowRange{});
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      RowRange& r = rows_[classes_.of(s, t)];
      if (r.offset >= 0) continue;
      r.offset = table_cells_;
      if (bounds_.floor(s, t) > M) continue;
      r.lo = static_cast<int>(bounds_.floor(s, t));
      r.hi = static_cast<int>(std::min(M, bounds_.keep_all(s, t)));
      table_cells_ += r.hi - r.lo + 1;
    }
  }
}

REMAT_VECTOR_CLONES
void MultiLevelDp::SolveInterval(int s, int t, float* out, DpStats* stats) const {
  const ChainTerms& T = terms_;
  const int lo = rows_[classes_.of(s, t)].lo, hi = rows_[classes_.of(s, t)].hi;
  const int n = hi - lo + 1;
  std::fill(out, out + n, kNoFit);

  // Keep layer s under each mode.
  for (int k = 0; k < T.num_modes(s); ++k) {
    int64_t need = std::max(T.ForwardNeed(s, t, k), T.backward_need(s, k));
    const float extra = static_cast<float>(T.mode(s, k).extra_ms);
    if (t == s + 1) {
      const int64_t begin = std::max<int64_t>(need, lo);
      if (begin <= hi) MinConst(out + (begin - lo), extra, static_cast<int>(hi - begin + 1));
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
  int64_t* sweep_need = sweep_need_scratch_.data();
  size_t steps = 0;
  for (; steps < sweep.size() && sweep[steps].first_split < t; ++steps) {
    sweep_need[steps] = T.SweepNeed(s, t, sweep[steps].bytes);
  }
  const int* right_class = classes_.column(t);
  const int* left_class = classes_.row(s);
  for (int sp = s + 1; sp < t; ++sp) {
    const int64_t swept = sweep_need[T.sweep_step(s, sp)];
    if (swept > hi) continue;
    const float fwd = static_cast<float>(T.ForwardMs(s, sp));
    if (fwd >= out[0]) return;  // out[0] is the row's maximum; fwd grows with s'
    const CostRow right = RowOf(right_class[sp]), left = RowOf(left_class[sp]);
    if (right.empty() || left.empty()) continue;
    const int64_t need = std::max(swept, std::max(xs + right.lo, int64_t{left.lo}));
    if (need > hi) continue;
    const int begin = static_cast<int>(std::max<int64_t>(need, lo));
    // Only m whose cost exceeds the split's lower bound can improve.
    const float bound = (fwd + right.last()) + left.last();
    const int stop = FirstAtMost(out, begin - lo, n, bound) + lo;
    if (stats != nullptr) {
      stats->split_cells += hi + 1 - begin;
      stats->split_cells_evaluated += std::max(0, stop - begin);
    }
    if (stop > begin) MinShifted2(out, lo, begin, stop, right, static_cast<int>(xs), left, fwd);
  }
}

IntervalChoice MultiLevelDp::Choose(int s, int t, int64_t m_in) const {
  const ChainTerms& T = terms_;
  // Of the schedules as fast as the best in m_in slots, take one that needs
  // the fewest: choose at the least m with the same cost.
  const CostRow row = Row(s, t);
  const int64_t m = row.lo + FirstAtMost(row.cost, 0, static_cast<int>(std::min<int64_t>(m_in, row.hi) - row.lo + 1), row.At(m_in));
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
    stats->rows = classes_.count();
    stats->memory_bytes = table_bytes() + bounds_.memory_bytes() +
                          static_cast<int64_t>(rows_.size() * sizeof(RowRange)) +
                          classes_.memory_bytes();
  }
  if (Row(0, L).empty()) return std::nullopt;
  table_.assign(table_cells_, kNoFit);
  sweep_need_scratch_.assign(L + 1, 0);
  std::vector<char> solved(classes_.count(), 0);  // the first interval of a class stands for all
  // Rows s are solved in tiles of kTileRows: within a tile, for each t, the
  // rows' intervals (s, t) by decreasing s. Interval (s, t) reads the right
  // parts (s', t), s' > s, and the left parts (s, s'), s' < t: a tile reads
  // each right part once for all its rows while it is in cache.
  for (int top = L; top > 0; top -= kTileRows) {
    const int bottom = std::max(0, top - kTileRows);
    for (int t = bottom + 1; t <= L; ++t) {
      for (int s = std::min(top, t) - 1; s >= bottom; --s) {
        const int c = classes_.of(s, t);
        if (solved[c] || rows_[c].lo > rows_[c].hi) continue;
        solved[c] = 1;
        SolveInterval(s, t, table_.data() + rows_[c].offset, stats);
      }
    }
  }
  return Reconstruct(terms_.slots());
}

int64_t MultiLevelDp::floor() const { return bounds_.floor(0, num_layers_); }

DpSolution MultiLevelDp::Reconstruct(int64_t slots) const {
  const int L = num_layers_;
  DpSolution solution;
  solution.recompute_ms = Row(0, L).At(slots);
  OpEmitter emitter(L);
  EmitInterval(terms_, 0, L, slots, [this](int s, int t, int64_t m) { return Choose(s, t, m); },
               &emitter);
  solution.ops = emitter.Finish();
  return solution;
}

}  // namespace remat::solver
