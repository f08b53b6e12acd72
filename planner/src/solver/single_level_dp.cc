#include "solver/single_level_dp.h"

#include <algorithm>
#include <limits>

#include "solver/back_track.h"
#include "solver/cost_row.h"

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
    const std::vector<SweepStep>& sweep = terms.sweep(s, L);
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
  const std::vector<SweepStep>& sweep = T.sweep(s, L);
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
  const int64_t m = LeastSlotsAtSameCost(Row(s), m_in);
  // A split runs the sweep, then the suffix from sp without x[s]'s slots,
  // with layers s..sp-1 all kept in their recompute.
  return ChooseInterval(T, s, L, m, Row(s + 1), [&](int sp, float* cost) {
    const CostRow sub = Row(sp);
    if (sub.empty() || m - T.x(s) < sub.lo ||
        keep_all_[static_cast<size_t>(s) * (L + 1) + sp] > m) {
      return false;
    }
    *cost = static_cast<float>(T.ForwardMs(s, sp)) + sub.At(m - T.x(s));
    return true;
  });
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
  SingleLevelSolution out = Walk(0, [this](int s, int64_t) { return lowest_peak_choice_[s]; });
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

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kNoChoice = std::numeric_limits<int>::min();
int EncodeKeep(int k) { return -(k + 1); }

// For m in [lo, hi]: where add + sub[m - shift] < row[m], that cost and
// `choice` (row and choices of one DP row). Without branches, so that it
// vectorizes; the same comparisons as one `if` per slot count.
REMAT_VECTOR_CLONES void RelaxRow(double* __restrict row, int* __restrict choices,
                                  const double* __restrict sub, int64_t shift, double add,
                                  int choice, int64_t lo, int64_t hi) {
  for (int64_t m = lo; m <= hi; ++m) {
    const double c = add + sub[m - shift];
    const bool better = c < row[m];
    row[m] = better ? c : row[m];
    choices[m] = better ? choice : choices[m];
  }
}

// best[m] = min(best[m], add + sub[m - shift]) for m in [lo, hi].
REMAT_VECTOR_CLONES void MinShifted(double* __restrict best, const double* __restrict sub,
                                    int64_t shift, double add, int64_t lo, int64_t hi) {
  for (int64_t m = lo; m <= hi; ++m) {
    const double v = add + sub[m - shift];
    best[m] = v < best[m] ? v : best[m];
  }
}

// Where from[m] < row[m] (m in [0, n)): that cost and its choice.
REMAT_VECTOR_CLONES void MergeRow(double* __restrict row, int* __restrict choices,
                                  const double* __restrict from, const int* __restrict from_choices,
                                  int64_t n) {
  for (int64_t m = 0; m < n; ++m) {
    const bool better = from[m] < row[m];
    row[m] = better ? from[m] : row[m];
    choices[m] = better ? from_choices[m] : choices[m];
  }
}

// A row of no fit: kInf, and kNoChoice (choices: null, none kept).
REMAT_VECTOR_CLONES void FillRow(double* __restrict row, int* __restrict choices, int64_t n) {
  for (int64_t m = 0; m < n; ++m) row[m] = kInf;
  if (choices == nullptr) return;
  for (int64_t m = 0; m < n; ++m) choices[m] = kNoChoice;
}

// row[m] = min(row[m], from[m]) for m in [0, n).
REMAT_VECTOR_CLONES void MinRow(double* __restrict row, const double* __restrict from, int64_t n) {
  for (int64_t m = 0; m < n; ++m) row[m] = from[m] < row[m] ? from[m] : row[m];
}

// The first m in [0, n) where the non-increasing `row` is finite (n: none).
int64_t FirstFinite(const double* row, int64_t n) {
  return FirstAtMost(row, 0, n, std::numeric_limits<double>::max());
}

// best[m] = min(best[m], add + 0) for m in [lo, hi].
REMAT_VECTOR_CLONES void MinConstant(double* __restrict best, double add, int64_t lo, int64_t hi) {
  const double v = add + 0;
  for (int64_t m = lo; m <= hi; ++m) best[m] = v < best[m] ? v : best[m];
}

// row[m] = add + sub[m - shift] for m in [lo, hi].
REMAT_VECTOR_CLONES void AssignShifted(double* __restrict row, const double* __restrict sub,
                                       int64_t shift, double add, int64_t lo, int64_t hi) {
  for (int64_t m = lo; m <= hi; ++m) row[m] = add + sub[m - shift];
}

// The slot counts MinWhileAbove relaxes between two looks at the row.
constexpr int64_t kRelaxRun = 32;

// MinShifted over [lo, last], `last` the last slot count from lo on where
// the non-increasing `row` is above `least`, the least cost of the
// relaxation (add + sub[n - 1 - shift] of a non-increasing `sub`), found on
// the way: a run of kRelaxRun slot counts is relaxed while the row is still
// above `least` at its first, so up to kRelaxRun - 1 cells past `last` are
// relaxed too, which leaves them as they are: there add + sub[m - shift] >=
// least >= row[m] (a sum is monotone in its terms), and a cell takes only
// a strictly lower cost. The row as a binary search for `last` then
// MinShifted leave it, without the search. A run whose last relaxation,
// add + sub[b - 1 - shift], is no lower than the row at its first cell
// is left out: every cell m of the run has row[m] <= row[a] and a
// relaxation of at least that (row and sub are non-increasing), so none
// changes.
REMAT_VECTOR_CLONES void MinWhileAbove(double* __restrict row, const double* __restrict sub,
                                       int64_t shift, double add, int64_t lo, int64_t n,
                                       double least) {
  for (int64_t a = lo; a < n && row[a] > least; a += kRelaxRun) {
    const int64_t b = std::min(n, a + kRelaxRun);
    if (!(add + sub[b - 1 - shift] < row[a])) continue;
    for (int64_t m = a; m < b; ++m) {
      const double v = add + sub[m - shift];
      row[m] = v < row[m] ? v : row[m];
    }
  }
}

// RelaxRow, or where no choices are kept (null) MinShifted: the same costs.
void Relax(double* row, int* choices, const double* sub, int64_t shift, double add, int choice,
           int64_t lo, int64_t hi) {
  if (choices != nullptr) {
    RelaxRow(row, choices, sub, shift, add, choice, lo, hi);
  } else {
    MinShifted(row, sub, shift, add, lo, hi);
  }
}

}  // namespace

SingleLevelOffloadDp::SingleLevelOffloadDp(const ChainTerms& terms,
                                           const SingleLevelOffloadOptions& options)
    : terms_(terms), options_(options), L_(terms.num_layers()), M_(terms.slots()), keep_all_() {
  // KeepAllNeeds (interval_bounds.h) with ChainTerms::BackwardNeedExact: the
  // layers after the first hold their inputs as keep() says; the first holds
  // it (keep_all_held_) or not (keep_all_).
  const int L = L_;
  const int64_t cap = terms.slots() + 1;
  keep_all_.assign(static_cast<size_t>(L + 1) * (L + 1), cap);
  keep_all_held_.assign(keep_all_.size(), cap);
  for (int s = L - 1; s >= 0; --s) {
    for (int t = s + 1; t <= L; ++t) {
      const size_t at = static_cast<size_t>(s) * (L + 1) + t;
      const int64_t forward = terms.ForwardNeed(s, t, 0);
      for (const bool held : {false, true}) {
        int64_t n = std::max(forward, terms.BackwardNeedExact(s, 0, held));
        if (t > s + 1) {
          n = std::max(n, (held ? terms.keep_holding_input(s, 0) : terms.keep(s, 0)) +
                              keep_all_[static_cast<size_t>(s + 1) * (L + 1) + t]);
        }
        (held ? keep_all_held_ : keep_all_)[at] = std::min(n, cap);
      }
    }
  }
  mode_at_.assign(L + 1, 0);
  for (int s = 0; s < L; ++s) {
    mode_at_[s + 1] = mode_at_[s] + terms.num_modes(s);
    for (int k = 0; k < terms.num_modes(s); ++k) {
      forward_need_end_.push_back(terms.ForwardNeed(s, L, k));
    }
  }
}

double SingleLevelOffloadDp::CopyCostMs(int s, double hide_ms) const {
  return CopyCostMs(options_.link.CopyMs(terms_.x_bytes(s)), hide_ms);
}

double SingleLevelOffloadDp::CopyCostMs(double copy_ms, double hide_ms) const {
  if (!options_.link.overlapped) return 2 * copy_ms;
  return std::max(0.0, copy_ms - hide_ms);
}

double SingleLevelOffloadDp::K(int s, int64_t m) const {
  if (s == L_) return 0;
  if (m < 0) return kInf;
  return k_[static_cast<size_t>(s) * (M_ + 1) + m];
}

double SingleLevelOffloadDp::KeepCost(int s, int k, int64_t m, bool held) const {
  const ChainTerms& T = terms_;
  const int64_t backward = T.BackwardNeedExact(s, k, held);
  if (m < std::max(T.ForwardNeed(s, L_, k), backward)) return kInf;
  return T.mode(s, k).extra_ms + K(s + 1, m - (held ? T.keep_holding_input(s, k) : T.keep(s, k)));
}

SingleLevelOffloadDp::Pick SingleLevelOffloadDp::OffSuffix(int sp, int64_t m, int s) const {
  const ChainTerms& T = terms_;
  const int64_t held = T.x(s);  // prefetched before backward sp
  const double backward_ms = T.profile().layers[sp].backward_ms;
  Pick best{kInf, kNoChoice};
  for (int k = 0; k < T.num_modes(sp); ++k) {
    if (m < T.BackwardNeedExact(sp, k, true) + held) continue;
    const double c = KeepCost(sp, k, m, true) + CopyCostMs(s, backward_ms + T.mode(sp, k).extra_ms);
    if (c < best.cost) best = {c, EncodeKeep(k)};
  }
  if (m >= T.segment_backward_need(sp) + held) {
    const double c = A(sp, m) + CopyCostMs(s, backward_ms);
    if (c < best.cost) best = {c, ChoiceAt(Table::kA, sp, m)};
  }
  return best;
}

SingleLevelOffloadDp::SegmentNeeds SingleLevelOffloadDp::Segment(int s, int sp, bool offload,
                                                                int64_t* swept,
                                                                int64_t* swept_off) const {
  const ChainTerms& T = terms_;
  const int j = sp - 1;
  const int64_t here = T.NoGradForwardBytes(j);
  *swept = std::max(*swept, here - (j == s ? T.x_bytes(s) : 0));
  *swept_off = std::max(*swept_off, here);
  // The segment's recompute: after a layer kept with grad x[s] carries its
  // graph and is released like any input (K); else it is held (A, N).
  const size_t at = static_cast<size_t>(s) * (L_ + 1) + sp;
  SegmentNeeds need;
  need.sweep = T.SweepNeed(s, L_, *swept);
  need.keep_all = s == 0 ? keep_all_held_[at] : keep_all_[at];
  need.keep_all_held = keep_all_held_[at];
  if (offload) {
    need.off = std::max(options_.link.overlapped ? need.sweep : T.units().Slots(*swept_off),
                        need.keep_all_held);
  }
  return need;
}

int SingleLevelOffloadDp::ChoiceAt(Table table, int s, int64_t m) const {
  const size_t at = static_cast<size_t>(s) * (M_ + 1) + m;
  if (options_.full_fill) {
    return (table == Table::kK ? k_choice_ : table == Table::kN ? n_choice_ : a_choice_)[at];
  }
  // The candidates of SolveRow at (s, m), in its order, each taken when
  // strictly cheaper: its choice is the first of the least cost, the
  // table's, where the walk stops. The cells SolveRow leaves out are those
  // where a candidate is not strictly cheaper, so they are weighed here
  // unbounded.
  const ChainTerms& T = terms_;
  const int L = L_;
  const bool link = options_.link.present();
  const bool same_keeps = s == 0 || T.profile().layers[s].keeps_input;
  // Folded (no link), N(s) takes the plain segments; where it is K(s), K's.
  if (table == Table::kN && !link && same_keeps) table = Table::kK;
  const double cost = (table == Table::kK ? k_ : table == Table::kN ? n_ : a_)[at];
  int chosen = kNoChoice;
  // Whether `c` is the table's cost (then `chosen` is `choice`).
  auto take = [&](double c, int choice) {
    if (c == cost) chosen = choice;
    return c == cost;
  };
  if (table != Table::kA) {
    const bool held = table == Table::kN || s == 0;
    for (int k = 0; k < T.num_modes(s); ++k) {
      const int64_t need = std::max(T.ForwardNeed(s, L, k), T.BackwardNeedExact(s, k, held));
      const int64_t shift = held ? T.keep_holding_input(s, k) : T.keep(s, k);
      const double extra = T.mode(s, k).extra_ms;
      if (s + 1 < L) {
        if (m >= std::max<int64_t>(need, shift) &&
            take(extra + K(s + 1, m - shift), EncodeKeep(k))) {
          return chosen;
        }
      } else if (m >= need && take(extra, EncodeKeep(k))) {
        return chosen;
      }
    }
    if (table == Table::kN && link) {
      // N(s) = its keeps, then A(s) where strictly cheaper.
      return A(s, m) == cost ? ChoiceAt(Table::kA, s, m) : kNoChoice;
    }
  }
  const bool plain = table != Table::kK;  // the plain segments of A (or of N, folded)
  const bool can_offload = table == Table::kA && s >= 1 && link;
  const int64_t xs = T.x(s);
  const double penalty = options_.host_penalty_ms_per_byte * static_cast<double>(T.x_bytes(s));
  const double copy_ms = can_offload ? options_.link.CopyMs(T.x_bytes(s)) : 0;
  int64_t swept = 0, swept_off = 0;
  for (int sp = s + 1; sp < L; ++sp) {
    const SegmentNeeds seg = Segment(s, sp, can_offload, &swept, &swept_off);
    const double fwd = T.ForwardMs(s, sp);
    int64_t lo = std::max(std::max(seg.sweep, seg.keep_all), xs);
    if (plain) lo = std::max(lo, std::max(seg.sweep, seg.keep_all_held));
    if (m >= lo && take(fwd + n_[static_cast<size_t>(sp) * (M_ + 1) + m - xs], sp)) {
      return chosen;
    }
    if (!can_offload || m < seg.off) continue;
    // The least of Off(sp, m, s)'s terms, as SolveRow adds them.
    const double backward_ms = T.profile().layers[sp].backward_ms;
    double off = kInf;
    for (int k = 0; k < T.num_modes(sp); ++k) {
      const double extra = T.mode(sp, k).extra_ms;
      const int64_t need =
          std::max(forward_need_end_[mode_at_[sp] + k], T.BackwardNeedExact(sp, k, true) + xs);
      const int64_t shift = T.keep_holding_input(sp, k);
      const double add = extra + CopyCostMs(copy_ms, backward_ms + extra);
      if (sp + 1 == L) {
        if (m >= need) off = std::min(off, add + 0);
      } else if (m >= std::max(need, shift)) {
        off = std::min(off, add + K(sp + 1, m - shift));
      }
    }
    if (m >= T.segment_backward_need(sp) + xs) {
      off = std::min(off, CopyCostMs(copy_ms, backward_ms) + A(sp, m));
    }
    if (take((fwd + penalty) + off, sp + L + 1)) return chosen;
  }
  return kNoChoice;  // (not reached: the table's cost is a candidate's)
}

void SingleLevelOffloadDp::SolveRow(int s) {
  const ChainTerms& T = terms_;
  const int L = L_;
  const size_t base = static_cast<size_t>(s) * (M_ + 1);
  // Without a link A(s) is read only through N(s) = min(keeps holding x[s],
  // A(s)): the segments then relax N directly, into the same values and
  // choices (keeps first, then the segments in order, each taking a slot
  // only when strictly cheaper, as N's merge with A does: a keep wins a tie,
  // and of equal segments the first), and A is neither stored nor filled.
  const bool link = options_.link.present();
  const bool fold = !link && !options_.full_fill;
  double* k_row = RowK(s);
  double* n_row = RowN(s);
  double* a_row = fold ? n_row : RowA(s);
  // (The choices are kept with full_fill only: Reconstruct finds them again.)
  const bool keep_choices = options_.full_fill;
  int* kc = keep_choices ? k_choice_.data() + base : nullptr;
  int* nc = keep_choices ? n_choice_.data() + base : nullptr;
  int* ac = keep_choices ? a_choice_.data() + base : nullptr;
  // K keeps layer s after a layer kept with grad (x[s] released after its
  // forward unless s == 0), N after one run without grad (x[s] held).
  const double* next_k = s + 1 < L ? k_.data() + static_cast<size_t>(s + 1) * (M_ + 1) : nullptr;
  // Every row is non-increasing in m (a minimum of non-increasing rows,
  // each finite on a suffix of the slots), so a relaxation of a row by add
  // + sub[m - shift] is left out (full_fill aside) where it cannot take a
  // slot: below the first finite cell of sub (shifted), where it costs
  // kInf, and from where `row` is at most the relaxation's least cost,
  // add + sub[M - shift], on.
  // The last slot count from `lo` on where a relaxation costing at least
  // `least` can still improve the non-increasing `row` (its cost there
  // above `least`); M_ with full_fill.
  const bool bounded = !options_.full_fill;
  auto improvable = [&](const double* row, int64_t lo, double least) {
    return bounded ? FirstAtMost(row, lo, M_ + 1, least) - 1 : M_;
  };
  // Relax from `lo` by a non-increasing `sub` whose least cost (at M) is
  // `least`: up to improvable(row, lo, least), found as it goes where
  // bounded (MinWhileAbove; no choices are kept then).
  auto relax_to_least = [&](double* row, int* choices, const double* sub, int64_t shift,
                            double add, int choice, int64_t lo, double least) {
    if (bounded) {
      MinWhileAbove(row, sub, shift, add, lo, M_ + 1, least);
    } else {
      Relax(row, choices, sub, shift, add, choice, lo, M_);
    }
  };
  // The first slot count where a relaxation reading `finite_from` (the
  // first finite cell of its sub row) shifted by `shift` can be finite.
  auto finite = [&](int64_t finite_from, int64_t shift) {
    return bounded ? finite_from + shift : 0;
  };
  // `unfilled`: the row is not filled yet (bounded, s + 1 < L): the first
  // keep that reaches it writes it whole, kInf below its `lo` and its cost
  // from there on, the cells a fill with kInf then its relaxation leave
  // (kInf is above every cost but kInf, which stays).
  auto keep_into = [&](int k, bool held, double* row, int* choice, bool* unfilled) {
    const int64_t need = std::max(T.ForwardNeed(s, L, k), T.BackwardNeedExact(s, k, held));
    const int64_t shift = held ? T.keep_holding_input(s, k) : T.keep(s, k);
    const double extra = T.mode(s, k).extra_ms;
    if (next_k != nullptr) {
      const int64_t lo = std::max(std::max<int64_t>(std::max<int64_t>(need, shift), 0),
                                  finite(finite_k_[s + 1], shift));
      if (lo > M_) return;
      if (*unfilled) {
        FillRow(row, nullptr, lo);
        AssignShifted(row, next_k, shift, extra, lo, M_);
        *unfilled = false;
        return;
      }
      relax_to_least(row, choice, next_k, shift, extra, EncodeKeep(k), lo,
                     extra + next_k[M_ - shift]);
      return;
    }
    for (int64_t m = std::max<int64_t>(need, 0); m <= M_; ++m) {
      if (extra < row[m]) {
        row[m] = extra;
        if (choice != nullptr) choice[m] = EncodeKeep(k);
      }
    }
  };
  // Folded, N(s) is K(s) when layer s keeps its input or s == 0: a layer
  // keeping its input has keep_holding_input == keep and the same
  // BackwardNeedExact held or not (chain_terms.h), so keep_all_held_ ==
  // keep_all_ on its row, and K(0) holds x[0] as N(0) does; both rows then
  // take the same relaxations in the same order. K is filled, and copied.
  // With a link the same holds of the keeps alone: N(s) takes K(s)'s keeps,
  // copied before the segments (full_fill aside).
  const bool same_keeps = s == 0 || T.profile().layers[s].keeps_input;
  const bool n_is_k = fold && same_keeps;
  const bool copy_keeps = !fold && bounded && same_keeps;
  const bool own_n = !n_is_k && !copy_keeps;  // N(s)'s keeps relaxed on their own
  bool k_unfilled = bounded && next_k != nullptr;
  bool n_unfilled = k_unfilled && own_n;
  if (!k_unfilled) FillRow(k_row, kc, M_ + 1);
  if (own_n && !n_unfilled) FillRow(n_row, nc, M_ + 1);
  if (!fold) FillRow(a_row, ac, M_ + 1);
  for (int k = 0; k < T.num_modes(s); ++k) {
    keep_into(k, s == 0, k_row, kc, &k_unfilled);
    if (own_n) keep_into(k, true, n_row, nc, &n_unfilled);
  }
  // (No keep reached them.)
  if (k_unfilled) FillRow(k_row, kc, M_ + 1);
  if (n_unfilled) FillRow(n_row, nc, M_ + 1);
  if (copy_keeps) std::copy(k_row, k_row + M_ + 1, n_row);
  const bool can_offload = s >= 1 && link;
  const int64_t xs = T.x(s);
  const double penalty = options_.host_penalty_ms_per_byte * static_cast<double>(T.x_bytes(s));
  const double copy_ms = can_offload ? options_.link.CopyMs(T.x_bytes(s)) : 0;
  int64_t swept = 0;      // max over forwards s..sp-1 of (j > s ? x[j] : 0) + x[j+1] + ws
  int64_t swept_off = 0;  // the same with x[s] released after forward s (in line)
  // Off(sp, m, s)'s terms (OffSuffix): one per keep mode of sp, and A(sp).
  std::vector<OffTerm>& terms = off_terms_;
  if (can_offload) off_best_.resize(M_ + 1);
  double* off_best = off_best_.data();
  // Whether row s - 1 offloads a checkpoint of the same size.
  const bool share_off = bounded && can_offload && s >= 2 && T.x(s - 1) == xs &&
                         T.x_bytes(s - 1) == T.x_bytes(s);
  // off_terms_' least at each m in [from, to] (kInf where none is finite).
  auto LeastTerm = [&](double* out, int64_t from, int64_t to = -1) {
    if (to < 0) to = M_;
    std::fill(out + from, out + to + 1, kInf);
    for (const OffTerm& t : terms) {
      const int64_t lo = std::max(t.from, from), hi = std::min(t.to, to);
      if (lo > hi) continue;
      if (t.row == nullptr) {
        MinConstant(out, t.add, lo, hi);
      } else {
        MinShifted(out, t.row, t.shift, t.add, lo, hi);
      }
    }
  };
  for (int sp = s + 1; sp < L; ++sp) {
    const SegmentNeeds seg = Segment(s, sp, can_offload, &swept, &swept_off);
    const int64_t sweep_need = seg.sweep, keep_all = seg.keep_all;
    const int64_t plain_need = std::max(sweep_need, seg.keep_all_held);
    const double fwd = T.ForwardMs(s, sp);
    const double* sub = n_.data() + static_cast<size_t>(sp) * (M_ + 1);
    const int64_t lo =
        std::max(std::max(std::max(sweep_need, keep_all), xs), finite(finite_n_[sp], xs));
    if (lo <= M_) {
      const double least = fwd + sub[M_ - xs];
      relax_to_least(k_row, kc, sub, xs, fwd, sp, lo, least);
      const int64_t plain_lo = std::max(lo, plain_need);
      if (plain_lo <= M_ && !n_is_k) {
        relax_to_least(a_row, ac, sub, xs, fwd, sp, plain_lo, least);
      }
    }
    if (!can_offload) continue;
    const int64_t off_need = seg.off;
    if (off_need > M_) continue;
    const double add = fwd + penalty;
    // Off(sp, m, s) is the least term at each m from off_need on (a term
    // below its need, or reading below its shift, costs kInf): one
    // vectorized pass a term, then the row relaxed by fwd + penalty + it.
    // Its terms depend on s only through x[s] (its slots and its copy
    // time), and off_need cuts them all alike: from off_need on, the least
    // term of rows s with the same x[s] is the same row, filled once (where
    // the next row's x[s] is the same) and read again.
    OffKey& key = off_keys_[sp];
    const bool reuse = bounded && key.slots == xs && key.bytes == T.x_bytes(s);
    const bool keep_it = !reuse && share_off;
    if (!reuse) {
      terms.clear();
      const double backward_ms = T.profile().layers[sp].backward_ms;
      const bool last = sp + 1 == L;
      const double* after = last ? nullptr : k_.data() + static_cast<size_t>(sp + 1) * (M_ + 1);
      for (int k = 0; k < T.num_modes(sp); ++k) {
        const double extra = T.mode(sp, k).extra_ms;
        const int64_t need =
            std::max(forward_need_end_[mode_at_[sp] + k], T.BackwardNeedExact(sp, k, true) + xs);
        const int64_t shift = T.keep_holding_input(sp, k);
        terms.push_back(
            {last ? need : std::max(std::max(need, shift), finite(finite_k_[sp + 1], shift)), M_,
             shift, extra + CopyCostMs(copy_ms, backward_ms + extra), after});
      }
      terms.push_back({std::max(T.segment_backward_need(sp) + xs, finite(finite_a_[sp], 0)), M_,
                       0, CopyCostMs(copy_ms, backward_ms),
                       a_.data() + static_cast<size_t>(sp) * (M_ + 1)});
    }
    if (reuse || keep_it) {
      double* kept = off_kept_.data() + static_cast<size_t>(sp) * (M_ + 1);
      if (keep_it) {
        key = {xs, T.x_bytes(s), M_ + 1};
        for (const OffTerm& t : terms) key.from = std::min(key.from, t.from);
        if (key.from <= M_) LeastTerm(kept, key.from);
      }
      const int64_t off_lo = std::max(off_need, key.from);
      if (off_lo > M_) continue;
      relax_to_least(a_row, ac, kept, 0, add, sp + L + 1, off_lo, add + kept[M_]);
      continue;
    }
    // Once: each term is non-increasing in m, and taken only where fwd +
    // penalty + its value at M is below the row (as above): where it is
    // not, the relaxation cannot take the slot through it, and the least of
    // the other terms is taken or not as before.
    int64_t off_lo = M_ + 1, off_hi = -1;
    for (OffTerm& t : terms) {
      t.from = std::max(off_need, t.from);
      if (t.from > M_) continue;
      t.to = improvable(a_row, t.from, add + (t.add + (t.row == nullptr ? 0 : t.row[M_ - t.shift])));
      if (t.to < t.from) continue;
      off_lo = std::min(off_lo, t.from);
      off_hi = std::max(off_hi, t.to);
    }
    if (off_hi < off_lo) continue;
    LeastTerm(off_best, off_lo, off_hi);
    Relax(a_row, ac, off_best, 0, add, sp + L + 1, off_lo, off_hi);
  }
  if (n_is_k) std::copy(k_row, k_row + M_ + 1, n_row);
  if (!fold) {
    if (keep_choices) {
      MergeRow(n_row, nc, a_row, ac, M_ + 1);
    } else {
      MinRow(n_row, a_row, M_ + 1);
    }
  }
  finite_k_[s] = FirstFinite(k_row, M_ + 1);
  finite_n_[s] = FirstFinite(n_row, M_ + 1);
  finite_a_[s] = FirstFinite(a_row, M_ + 1);
}

std::optional<SingleLevelSolution> SingleLevelOffloadDp::Solve(DpStats* stats) {
  const size_t cells = static_cast<size_t>(L_) * (M_ + 1);
  // (Each row filled with kInf and kNoChoice by its SolveRow.)
  k_.Resize(cells);
  n_.Resize(cells);
  // A: with a link only (SolveRow folds it into N otherwise).
  const size_t a_cells = options_.link.present() || options_.full_fill ? cells : 0;
  a_.Resize(a_cells);
  k_choice_.Resize(options_.full_fill ? cells : 0);
  n_choice_.Resize(options_.full_fill ? cells : 0);
  a_choice_.Resize(options_.full_fill ? a_cells : 0);
  const bool share = options_.link.present() && !options_.full_fill;
  off_kept_.Resize(share ? cells : 0);
  off_keys_.assign(L_, OffKey{});
  finite_k_.assign(L_, M_ + 1);
  finite_n_.assign(L_, M_ + 1);
  finite_a_.assign(L_, M_ + 1);
  cancelled_ = false;
  for (int s = L_ - 1; s >= 0; --s) {
    if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
      cancelled_ = true;
      floor_ = M_ + 1;
      return std::nullopt;
    }
    SolveRow(s);
  }
  floor_ = M_ + 1;
  for (int64_t m = 0; m <= M_; ++m) {
    if (k_[m] < kInf) {
      floor_ = m;
      break;
    }
  }
  if (stats != nullptr) {
    *stats = DpStats{};
    stats->slots = M_;
    stats->slot_bytes = terms_.units().slot_bytes();
    stats->table_cells = static_cast<int64_t>(2 * cells + a_cells);
    // (The choices kept with full_fill only; the shared offload terms with a link.)
    const size_t doubles = 2 * cells + a_cells + (share ? cells : 0);
    const size_t ints = options_.full_fill ? 2 * cells + a_cells : 0;
    stats->memory_bytes = static_cast<int64_t>(doubles * sizeof(double) + ints * sizeof(int));
  }
  if (floor_ > M_) return std::nullopt;
  return Reconstruct(M_);
}

SingleLevelSolution SingleLevelOffloadDp::Reconstruct(int64_t slots) const {
  const ChainTerms& T = terms_;
  const int L = L_;
  SingleLevelSolution out;
  out.decisions.assign(L, LayerDecision::kKeep);
  out.selective_option.assign(L, -1);
  out.recompute_ms = k_[static_cast<size_t>(slots)];
  enum class From { kKept, kNoGrad, kOffloaded } from = From::kKept;
  int64_t m = slots;
  int offloaded = -1;  // the checkpoint whose prefetch the next backward holds
  for (int s = 0; s < L;) {
    const int c = from == From::kKept     ? ChoiceAt(Table::kK, s, m)
                  : from == From::kNoGrad ? ChoiceAt(Table::kN, s, m)
                                          : OffSuffix(s, m, offloaded).choice;
    if (c == kNoChoice) break;  // not reached: Reconstruct follows finite costs
    if (c < 0) {
      const int k = -c - 1;
      const KeepMode& mode = T.mode(s, k);
      if (mode.save == SaveMode::kSelective) {
        out.decisions[s] = LayerDecision::kSelective;
        out.selective_option[s] = mode.option;
      }
      m -= from == From::kKept && s > 0 ? T.keep(s, k) : T.keep_holding_input(s, k);
      from = From::kKept;
      ++s;
      continue;
    }
    const bool off = c > L;
    const int sp = off ? c - L - 1 : c;
    out.decisions[s] = off ? LayerDecision::kOffload : LayerDecision::kCheckpoint;
    for (int j = s + 1; j < sp; ++j) out.decisions[j] = LayerDecision::kRecompute;
    if (off) {
      offloaded = s;
      from = From::kOffloaded;
    } else {
      m -= T.x(s);
      from = From::kNoGrad;
    }
    s = sp;
  }
  return out;
}

}  // namespace remat::solver
