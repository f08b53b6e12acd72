#include "solver/multilevel_dp.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "solver/back_track.h"
#include "solver/op_emitter.h"
#include "solver/table_pool.h"

namespace remat::solver {
namespace {

// Rows per tile of the reference order (see FillReference): its threads
// take one tile each, so the last tile (the longest intervals) is what one
// thread fills while the others have none left; 16 and 32 take the same
// CPU time on the 256-layer measured chain at 1000 slots.
constexpr int kReferenceTileRows = 16;
// Rows and columns per tile of the tiled order (see FillTiled).
constexpr int kTileRows = 8;
constexpr int kTileCols = 32;
// Slot counts evaluated between two checks of a split's bound (fewer
// check more often than they save: a check reads both parts' rows where
// the evaluation may not, and a short chunk is mostly loop overhead; on the
// 256-layer measured chain at 1000 slots, 64 took 11% more instructions).
constexpr int kBoundChunk = 128;

// The cap as a float no smaller than the double (and a relative 1e-6 above
// it, so that float sums of a schedule costing the cap stay under it).
float RoundedUpCap(double cap) {
  // (A cap beyond the floats caps nothing, one below them keeps nothing:
  // converting either would be undefined.)
  const double raised = cap * (1 + 1e-6);
  constexpr double kMax = std::numeric_limits<float>::max();
  if (!(raised < kMax)) return kNoFit;
  return std::nextafter(static_cast<float>(std::max(raised, -kMax)), kNoFit);
}

// Whether keep mode j of layer s makes mode k of no use to the keeps of any
// interval starting at s: k keeps at least j's slots, peaks at least as
// high forward (ForwardNeed is monotone in the mode's kept and workspace
// bytes, for every t) and backward, and costs at least j's extra time (as
// the float the fill adds). Then at every m where k fits, j fits and
// extra_j + sub(m - keep_j) <= extra_k + sub(m - keep_k) (rows are
// non-increasing, float addition is monotone): k never lowers a cell.
// Of two modes alike in all four, the first is kept.
bool Dominates(const ChainTerms& T, int s, int j, int k) {
  const KeepMode &a = T.mode(s, j), &b = T.mode(s, k);
  const float extra_a = static_cast<float>(a.extra_ms), extra_b = static_cast<float>(b.extra_ms);
  const int64_t forward_a = a.kept_bytes + a.forward_workspace_bytes;
  const int64_t forward_b = b.kept_bytes + b.forward_workspace_bytes;
  if (!(T.keep(s, j) <= T.keep(s, k) && forward_a <= forward_b &&
        T.backward_need(s, j) <= T.backward_need(s, k) && extra_a <= extra_b)) {
    return false;
  }
  const bool alike = T.keep(s, j) == T.keep(s, k) && forward_a == forward_b &&
                     T.backward_need(s, j) == T.backward_need(s, k) && extra_a == extra_b;
  return !alike || j < k;
}

}  // namespace

// Interval (s, t) with t < L enters a schedule of the whole chain only as
// the left part of a split at t (of an interval (s0, t') with s0 <= s),
// possibly followed by keeps and splits that keep t: that split recomputes
// layers s0..t-1 forward, at least ForwardMs(s, t), and every other term of
// the schedule's cost is non-negative. So a cell of (s, t) costing more
// than cap - ForwardMs(s, t) is part of no schedule costing at most the cap.
// The margin covers float rounding: along a path of the schedule's tree
// (at most L deep) each float addition of non-negative terms loses at most
// a relative 2^-24 of the cap. Intervals ending at L (the root's, and the
// right parts of its splits) are capped by the cap itself. The members of
// a class share their layers and their end flags, so the canonical
// interval's cap is every member's.
// With suffix costs (SuffixCosts), the cap is lowered by what the rest of
// such a schedule costs after t: going up from (s, t), each interval
// ending before L is the left part of a split at its end b_i of an interval
// (a, b_{i+1}), a <= s, whose right part (b_i, b_{i+1}) costs at least its
// row's least cost and, where b_{i+1} < L, is itself reached by a split at
// b_{i+1} recomputing at least ForwardMs(b_i, b_{i+1}): SuffixCosts(t) is
// the least sum of those along any such chain t = b_0 < b_1 < ... = L.
// Rounding up never costs less than rounding down cell by cell, so the
// least costs of a relaxation's rows bound the conservative rows' too. The
// sums rounded along the sibling paths take a second margin.
float MultiLevelDp::RowCap(int s, int t) const {
  if (!(cap_ < kNoFit) || t == num_layers_ || !options_.row_caps) return cap_;
  const double margin = (4.0 * num_layers_ + 16) * std::ldexp(double{cap_}, -24);
  double cap = double{cap_} + margin - terms_.ForwardMs(s, t);
  if (options_.suffix_costs != nullptr) {
    cap -= (*options_.suffix_costs)[static_cast<size_t>(t)] - margin;
  }
  if (cap < 0) return -1;
  if (!(cap < std::numeric_limits<float>::max())) return kNoFit;
  return std::nextafter(static_cast<float>(cap), kNoFit);
}

MultiLevelDp::MultiLevelDp(const ChainTerms& terms, const DpOptions& options)
    : terms_(terms),
      num_layers_(terms.num_layers()),
      options_(options),
      cap_(RoundedUpCap(options.cost_cap_ms)),
      classes_holder_(options.classes != nullptr ? options.classes
                                                 : std::make_shared<const IntervalClasses>(
                                                       terms.profile(), options.gradients)),
      classes_(*classes_holder_),
      bounds_holder_(options.bounds != nullptr
                         ? options.bounds
                         : std::make_shared<const IntervalBounds>(terms, classes_,
                                                                  /*track_choices=*/false)),
      bounds_(*bounds_holder_) {
  const int L = num_layers_;
  const int64_t M = terms.slots();
  keep_modes_begin_.assign(L + 1, 0);
  for (int s = 0; s < L; ++s) {
    const int modes = terms.num_modes(s);
    for (int k = 0; k < modes; ++k) {
      bool dominated = false;
      for (int j = 0; j < modes && options.skip_dominated_modes && !dominated; ++j) {
        dominated = j != k && Dominates(terms, s, j, k);
      }
      if (!dominated) keep_modes_.push_back(k);
    }
    keep_modes_begin_[s + 1] = static_cast<int>(keep_modes_.size());
  }
  rows_.assign(classes_.count(), RowRange{});
  for (int c = 0; c < classes_.count(); ++c) {
    const int s = classes_.canonical_s(c), t = classes_.canonical_t(c);
    RowRange& r = rows_[c];
    r.offset = table_cells_;
    r.cap = RowCap(s, t);
    // (A row whose cap is below 0 is of no use: left empty, like one that
    // does not fit.)
    const int64_t start = std::max(bounds_.floor(s, t),
                                   options.row_starts != nullptr
                                       ? int64_t{(*options.row_starts)[static_cast<size_t>(c)]}
                                       : int64_t{0});
    const int64_t end = std::min(M, bounds_.keep_all(s, t));
    if (start > end || r.cap < 0) continue;
    r.lo = static_cast<int>(start);
    r.hi = static_cast<int>(end);
    table_cells_ += r.hi - r.lo + 1;
  }
  if (options.gradients == GradientKey::kShifted) {
    shift_.assign(static_cast<size_t>(L + 1) * (L + 1), 0);
    for (int s = 0; s < L; ++s) {
      for (int t = s + 1; t <= L; ++t) {
        // At most M + 1 (the unit's saturation): a row shifted past M is
        // never read in range.
        shift_[static_cast<size_t>(s) * (L + 1) + t] =
            static_cast<int>(terms.units().Slots(classes_.shift_bytes(s, t)));
      }
    }
  }
}

REMAT_VECTOR_CLONES
void MultiLevelDp::SolveKeeps(int s, int t, float* out, bool unfilled) const {
  const ChainTerms& T = terms_;
  const RowRange& range = rows_[classes_.of(s, t)];
  const int lo = range.lo, hi = range.hi;
  // The first keep to reach an unfilled row: kNoFit below its first cell,
  // its costs from there (the cells a fill with kNoFit and then its
  // relaxation leave).
  auto first_fill = [&](int begin) {
    std::fill(out, out + (begin - lo), kNoFit);
    unfilled = false;
  };
  for (int i = keep_modes_begin_[s]; i < keep_modes_begin_[s + 1]; ++i) {
    const int k = keep_modes_[i];
    int64_t need = std::max(T.ForwardNeed(s, t, k), T.backward_need(s, k));
    const float extra = static_cast<float>(T.mode(s, k).extra_ms);
    if (t == s + 1) {
      const int64_t begin = std::max<int64_t>(need, lo);
      if (begin > hi) continue;
      if (unfilled) {
        first_fill(static_cast<int>(begin));
        std::fill(out + (begin - lo), out + (hi - lo + 1), std::min(kNoFit, extra));
        continue;
      }
      MinConst(out + (begin - lo), extra, static_cast<int>(hi - begin + 1));
      continue;
    }
    const CostRow sub = Row(s + 1, t);
    if (sub.empty()) continue;
    const int64_t keep = T.keep(s, k);
    need = std::max(need, keep + sub.lo);
    if (need > hi) continue;
    const int begin = static_cast<int>(std::max<int64_t>(need, lo));
    if (unfilled) {
      first_fill(begin);
      AssignShifted(out, lo, begin, hi + 1, sub, static_cast<int>(keep), extra);
      continue;
    }
    MinShifted(out, lo, begin, hi + 1, sub, static_cast<int>(keep), extra);
  }
  // (No keep reached it.)
  if (unfilled) std::fill(out, out + (hi - lo + 1), kNoFit);
}

void MultiLevelDp::SweepNeeds(int s, int t, int64_t* out) const {
  const std::vector<SweepStep>& sweep = terms_.sweep(s, t);
  for (size_t r = 0; r < sweep.size() && sweep[r].first_split < t; ++r) {
    out[r] = terms_.SweepNeed(s, t, sweep[r].bytes);
  }
}

int64_t MultiLevelDp::TableBytesBound(const ChainTerms& terms, GradientKey gradients) {
  return TableBytesBound(terms, IntervalClasses(terms.profile(), gradients));
}

int64_t MultiLevelDp::TableBytesBound(const ChainTerms& terms, const IntervalClasses& classes) {
  const int L = terms.num_layers();
  const int64_t M = terms.slots();
  const std::vector<int64_t> keep_all = KeepAllNeeds(terms);
  // A layer's backward needs at least its least backward peak, whatever
  // interval it is solved in.
  std::vector<int64_t> backward(L);
  for (int i = 0; i < L; ++i) {
    backward[i] = terms.backward_need(i, 0);
    for (int k = 1; k < terms.num_modes(i); ++k) {
      backward[i] = std::min(backward[i], terms.backward_need(i, k));
    }
  }
  int64_t cells = 0;
  for (int s = 0; s < L; ++s) {
    int64_t floor = 0;
    for (int t = s + 1; t <= L; ++t) {
      floor = std::max(floor, backward[t - 1]);
      const int c = classes.of(s, t);
      // A class's row spans its canonical interval's range.
      if (classes.canonical_s(c) != s) continue;
      const int64_t hi = std::min(M, keep_all[static_cast<size_t>(s) * (L + 1) + t]);
      cells += std::max<int64_t>(0, hi - floor + 1);
    }
  }
  return cells * static_cast<int64_t>(sizeof(float));
}

REMAT_VECTOR_CLONES
bool MultiLevelDp::SolveSplits(int s, int t, float* out, int p_begin, int p_end,
                               const int64_t* sweep_need, DpStats* stats) const {
  const ChainTerms& T = terms_;
  const RowRange& range = rows_[classes_.of(s, t)];
  const int lo = range.lo, hi = range.hi;
  // (A local copy: the row's stores into `out` are floats, as RowRange's
  // cap is, so the compiler would read it again after each.)
  const float cap = range.cap;
  const int64_t xs = T.x(s);
  const int* right_class = classes_.column(t);
  const int* left_class = classes_.row(s);
  for (int sp = p_begin; sp < p_end; ++sp) {
    const int64_t swept = sweep_need[T.sweep_step(s, t, sp)];
    if (swept > hi) return true;  // later splits sweep at least as high
    const float fwd = static_cast<float>(T.ForwardMs(s, sp));
    if (fwd >= out[0] || fwd > cap) return false;  // out[0] is the row's maximum
    const CostRow right = RowOf(right_class[sp]), left = RowOf(left_class[sp]);
    if (right.empty() || left.empty()) continue;
    const int64_t need = std::max(swept, std::max(xs + right.lo, int64_t{left.lo}));
    if (need > hi) continue;
    const int begin = static_cast<int>(std::max<int64_t>(need, lo));
    // Only m whose cost exceeds the split's lower bound can improve; out is
    // non-increasing, so that is a prefix, found chunk by chunk (evaluating
    // a chunk past it changes nothing).
    const float bound = (fwd + rows_[right_class[sp]].last) + rows_[left_class[sp]].last;
    int m = begin;
    int64_t evaluated = 0;
    // Above the row's cap a cell is of no use (FinishRow drops it), so a
    // split whose least cost exceeds it is skipped, and so is every chunk
    // where the split costs more than it throughout.
    if (options_.chunk_bounds && bound > cap) m = hi + 1;
    // Chunks kept one after another are evaluated as one run once the
    // next is decided: a chunk's checks read out at and after its own
    // first cell, which the evaluation of the chunks before leaves as it
    // is.
    int run_begin = m, run_end = m;
    while (m <= hi && out[m - lo] > bound) {
      const int e = std::min(hi + 1, m + kBoundChunk);
      // The same bound per chunk: at every m' in [m, e) the split costs at
      // least its cost at e - 1 (both rows are non-increasing and float
      // addition is monotone) and out[m'] <= out[m], so when out[m] is no
      // more than that, or that is above the row's cap, no cell of the
      // chunk can improve or be kept. Exact: the cells kept are those the
      // evaluation would give.
      const float at_end = options_.chunk_bounds ? (fwd + right.At(e - 1 - xs)) + left.At(e - 1)
                                                 : -kNoFit;
      if (out[m - lo] > at_end && !(at_end > cap)) {
        if (run_end < m) {
          if (run_begin < run_end) {
            MinShifted2(out, lo, run_begin, run_end, right, static_cast<int>(xs), left, fwd);
          }
          run_begin = m;
        }
        run_end = e;
        evaluated += e - m;
      }
      m = e;
    }
    if (run_begin < run_end) {
      MinShifted2(out, lo, run_begin, run_end, right, static_cast<int>(xs), left, fwd);
    }
    if (stats != nullptr) {
      stats->split_cells += hi + 1 - begin;
      stats->split_cells_evaluated += evaluated;
    }
  }
  return true;
}

void MultiLevelDp::SolveInterval(int s, int t, float* out, int64_t* sweep_need,
                                 DpStats* stats) const {
  SolveKeeps(s, t, out, /*unfilled=*/true);
  SweepNeeds(s, t, sweep_need);
  SolveSplits(s, t, out, s + 1, t, sweep_need, stats);
}

IntervalChoice MultiLevelDp::Choose(int s, int t, int64_t m_in) const {
  const ChainTerms& T = terms_;
  const int64_t m = LeastSlotsAtSameCost(Row(s, t), m_in);
  const int64_t xs = T.x(s);
  // A split runs the sweep, then the right part (sp, t) without x[s]'s
  // slots, then the left part (s, sp).
  return ChooseInterval(
      T, s, t, m, t > s + 1 ? Row(s + 1, t) : CostRow{}, [&](int sp, float* cost) {
        const CostRow right = Row(sp, t), left = Row(s, sp);
        if (right.empty() || left.empty() || m - xs < right.lo || m < left.lo) return false;
        *cost = (static_cast<float>(T.ForwardMs(s, sp)) + right.At(m - xs)) + left.At(m);
        return true;
      });
}

MultiLevelDp::~MultiLevelDp() { GiveBackTable(std::move(table_)); }

std::optional<DpSolution> MultiLevelDp::Solve(DpStats* stats) {
  const int L = num_layers_;
  if (stats != nullptr) {
    *stats = DpStats{};
    stats->slots = terms_.slots();
    stats->slot_bytes = terms_.units().slot_bytes();
    stats->table_cells = table_cells_;
    stats->rows = classes_.count();
    stats->keep_modes = static_cast<int64_t>(keep_modes_.size());
    stats->memory_bytes = table_bytes() + bounds_.memory_bytes() +
                          static_cast<int64_t>(rows_.size() * sizeof(RowRange)) +
                          classes_.memory_bytes();
  }
  if (Row(0, L).empty()) return std::nullopt;
  // Storage whose pages an earlier solve touched, where one is kept.
  if (table_.capacity() < static_cast<size_t>(table_cells_)) table_ = TakeTable(table_cells_);
  // Left unwritten: the fill writes every row (kNoFit first) before any
  // read of it.
  table_.resize(table_cells_);
  if (options_.fill == DpFill::kTiled) {
    FillTiled(stats);
  } else {
    FillReference(stats);
  }
  cancelled_ = Cancelled();
  if (cancelled_) {
    table_.clear();
    return std::nullopt;
  }
  if (Row(0, L).empty()) return std::nullopt;
  return Reconstruct(terms_.slots());
}

void MultiLevelDp::FillReference(DpStats* stats) {
  const int L = num_layers_;
  // Rows s are solved in tiles of kReferenceTileRows: within a tile, for
  // each t, the rows' intervals (s, t) by decreasing s. Interval (s, t)
  // reads the right parts (s', t), s' > s, and the left parts (s, s'),
  // s' < t: a tile reads each right part once for all its rows while it is
  // in cache. Tile k (rows [L - (k+1) R, L - k R)) reads, of the tiles
  // above it, only their columns t <= its own t: so tiles are filled on
  // several threads at once, tile k's column t once tile k-1 has finished
  // it (and so every tile above). The first interval of a class stands for
  // all, so tiles run at once only where no two intervals share a class.
  const int tiles = (L + kReferenceTileRows - 1) / kReferenceTileRows;
  const bool shared = classes_.count() < static_cast<int64_t>(L) * (L + 1) / 2;
  const bool parallel = !shared && table_cells_ >= options_.min_parallel_cells;
  const int threads = parallel ? std::clamp(options_.threads, 1, tiles) : 1;
  std::vector<char> solved(classes_.count(), 0);
  // done[k]: the columns t < done[k] of tile k are solved (L + 1: all, or
  // the fill was cancelled).
  std::vector<int> done(tiles, 0);
  std::mutex mutex;
  std::condition_variable progress;
  std::atomic<int> next{0};
  std::vector<DpStats> thread_stats(threads);
  auto publish = [&](int k, int columns) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      done[k] = columns;
    }
    progress.notify_all();
  };
  auto work = [&](int w) {
    DpStats* st = stats == nullptr ? nullptr : threads > 1 ? &thread_stats[w] : stats;
    std::vector<int64_t> sweep_need(L + 1);
    for (int k = next++; k < tiles; k = next++) {
      const int top = L - k * kReferenceTileRows;
      const int bottom = std::max(0, top - kReferenceTileRows);
      for (int t = bottom + 1; t <= L; ++t) {
        if (Cancelled()) break;
        // (s', t) with s' >= top exists only for t > top.
        if (threads > 1 && k > 0 && t > top) {
          std::unique_lock<std::mutex> lock(mutex);
          progress.wait(lock, [&] { return done[k - 1] > t; });
        }
        for (int s = std::min(top, t) - 1; s >= bottom; --s) {
          const int c = classes_.of(s, t);
          if (solved[c] || rows_[c].lo > rows_[c].hi) continue;
          solved[c] = 1;
          // At its canonical interval: the rows it reads are those (s, t)
          // reads, of the same classes, all solved by now.
          SolveInterval(classes_.canonical_s(c), classes_.canonical_t(c),
                        table_.data() + rows_[c].offset, sweep_need.data(), st);
          FinishRow(c);
        }
        if (threads > 1 && t > top) publish(k, t + 1);
      }
      if (threads > 1) publish(k, L + 1);
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& th : pool) th.join();
  if (stats != nullptr && threads > 1) {
    for (const DpStats& st : thread_stats) {
      stats->split_cells += st.split_cells;
      stats->split_cells_evaluated += st.split_cells_evaluated;
    }
  }
}

// Interval (s, t) reads the right parts (p, t) and the left parts (s, p),
// s < p < t. The reference order (rows s in tiles, one column t at a time)
// reads each right part once per tile of rows but each left part once per
// column, and the fill is bound by that memory traffic. Here a tile is a
// block of rows S = [s0, s1) by a block of columns T = [t0, t1), and a
// split p between them (s1 <= p < t0) only reads rows outside the tile, all
// final. So those splits are evaluated first for the whole tile, p by p:
// each left part (s, p) is then read once per tile of columns and each right
// part (p, t) once per tile of rows. The rest, which read rows of the tile
// (keeps, p < s1, p >= t0), follow cell by cell in dependency order (s
// decreasing, t increasing). Every candidate is evaluated with the same
// float operations, so the tables are the reference's; only the bound
// prunes differently (it sees the candidates in another order).
void MultiLevelDp::FillTiled(DpStats* stats) {
  const int L = num_layers_;
  // Tile (i, j): rows [max(0, L - (i+1) R), L - i R), columns [1 + j C,
  // 1 + (j+1) C) (R = kTileRows, C = kTileCols). It reads tiles (i, j') for
  // j' < j and (i', j) for i' < i, so the tiles with the same i + j can be
  // filled at once.
  const int row_blocks = (L + kTileRows - 1) / kTileRows;
  const int col_blocks = (L + kTileCols - 1) / kTileCols;
  std::vector<std::vector<std::pair<int, int>>> waves(row_blocks + col_blocks);
  for (int i = 0; i < row_blocks; ++i) {
    const int s0 = std::max(0, L - (i + 1) * kTileRows);
    for (int j = 0; j < col_blocks; ++j) {
      if (1 + (j + 1) * kTileCols - 1 <= s0 + 1 - 1) continue;  // every t <= s0
      waves[i + j].push_back({i, j});
    }
  }
  // Each class is solved by its first interval in fill order (the rows it
  // reads are solved earlier in that order).
  std::vector<char> solves(static_cast<size_t>(L + 1) * (L + 1), 0);
  std::vector<char> seen(classes_.count(), 0);
  bool shared = false;
  for (const auto& wave : waves) {
    for (const auto& [i, j] : wave) {
      const int s1 = L - i * kTileRows, s0 = std::max(0, s1 - kTileRows);
      const int t0 = 1 + j * kTileCols, t1 = std::min(L + 1, t0 + kTileCols);
      for (int s = s1 - 1; s >= s0; --s) {
        for (int t = std::max(t0, s + 1); t < t1; ++t) {
          const int c = classes_.of(s, t);
          if (seen[c]) {
            shared = true;
            continue;
          }
          seen[c] = 1;
          if (rows_[c].lo <= rows_[c].hi) solves[static_cast<size_t>(s) * (L + 1) + t] = 1;
        }
      }
    }
  }
  // Tiles of a wave run on separate threads when no two intervals share a
  // row (a shared row might be solved by one tile of the wave and read by
  // another) and the tables are large enough to pay for starting threads
  // once per wave.
  const bool parallel = !shared && table_cells_ >= options_.min_parallel_cells;
  const int threads = parallel ? std::max(1, options_.threads) : 1;
  std::vector<DpStats> thread_stats(threads);
  for (const auto& wave : waves) {
    if (Cancelled()) return;
    const int workers = std::min<int>(threads, static_cast<int>(wave.size()));
    if (workers <= 1) {
      for (const auto& [i, j] : wave) SolveTile(i, j, solves, stats);
      continue;
    }
    std::atomic<size_t> next{0};
    auto work = [&](int w) {
      for (size_t k = next++; k < wave.size(); k = next++) {
        SolveTile(wave[k].first, wave[k].second, solves, stats ? &thread_stats[w] : nullptr);
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);
    for (std::thread& th : pool) th.join();
  }
  if (stats != nullptr) {
    for (const DpStats& st : thread_stats) {
      stats->split_cells += st.split_cells;
      stats->split_cells_evaluated += st.split_cells_evaluated;
    }
  }
}

void MultiLevelDp::SolveTile(int i, int j, const std::vector<char>& solves, DpStats* stats) {
  const int L = num_layers_;
  const int s1 = L - i * kTileRows, s0 = std::max(0, s1 - kTileRows);
  const int t0 = 1 + j * kTileCols, t1 = std::min(L + 1, t0 + kTileCols);
  // Each cell is solved at its class's canonical interval (cs, cs + t - s):
  // a split p of (s, t) is its split p + shift.
  struct Cell {
    int c;
    int cs;            // the canonical interval's first layer
    bool open;         // the bound has not closed the row to later splits
    int64_t sweep_at;  // offset of its sweep peaks in `sweeps`
  };
  std::vector<Cell> cells;
  if (Cancelled()) return;
  std::vector<int64_t> sweeps;
  std::vector<int> cell_at(static_cast<size_t>(kTileRows) * kTileCols, -1);
  auto at = [&](int s, int t) -> int& {
    return cell_at[static_cast<size_t>(s - s0) * kTileCols + (t - t0)];
  };
  for (int s = s1 - 1; s >= s0; --s) {
    for (int t = std::max(t0, s + 1); t < t1; ++t) {
      if (!solves[static_cast<size_t>(s) * (L + 1) + t]) continue;
      const int c = classes_.of(s, t);
      const int cs = classes_.canonical_s(c), ct = classes_.canonical_t(c);
      float* out = table_.data() + rows_[c].offset;
      std::fill(out, out + (rows_[c].hi - rows_[c].lo + 1), kNoFit);
      at(s, t) = static_cast<int>(cells.size());
      cells.push_back({c, cs, true, static_cast<int64_t>(sweeps.size())});
      sweeps.resize(sweeps.size() + terms_.sweep(cs, ct).size());
      SweepNeeds(cs, ct, sweeps.data() + cells.back().sweep_at);
    }
  }
  if (cells.empty()) return;
  // Splits between the row block and the column block, for the whole tile.
  for (int p = s1; p < t0; ++p) {
    for (int t = t0; t < t1; ++t) {
      for (int s = s1 - 1; s >= s0; --s) {
        const int k = at(s, t);
        if (k < 0 || !cells[k].open) continue;
        Cell& cell = cells[k];
        const int d = cell.cs - s;
        cell.open = SolveSplits(cell.cs, t + d, table_.data() + rows_[cell.c].offset, p + d,
                                p + d + 1, sweeps.data() + cell.sweep_at, stats);
      }
    }
  }
  // The rest, cell by cell.
  for (int s = s1 - 1; s >= s0; --s) {
    for (int t = std::max(t0, s + 1); t < t1; ++t) {
      const int k = at(s, t);
      if (k < 0) continue;
      const Cell& cell = cells[k];
      const int d = cell.cs - s, cs = cell.cs, ct = t + d;
      float* out = table_.data() + rows_[cell.c].offset;
      SolveKeeps(cs, ct, out);
      const int64_t* sweep_need = sweeps.data() + cell.sweep_at;
      SolveSplits(cs, ct, out, cs + 1, std::min(s1, t) + d, sweep_need, stats);
      if (cell.open) SolveSplits(cs, ct, out, std::max(t0, s1) + d, ct, sweep_need, stats);
      FinishRow(cell.c);
    }
  }
}

void MultiLevelDp::FinishRow(int c) {
  RowRange& r = rows_[c];
  if (r.lo > r.hi) return;
  const float* cost = table_.data() + r.offset;
  const int n = r.hi - r.lo + 1;
  r.last = cost[n - 1];
  if (!(r.cap < kNoFit)) return;
  const int first = FirstAtMost(cost, 0, n, r.cap);
  r.lo += first;
  r.offset += first;
}

std::vector<int> MultiLevelDp::RowStarts() const {
  std::vector<int> starts(rows_.size());
  for (size_t c = 0; c < rows_.size(); ++c) {
    const RowRange& r = rows_[c];
    starts[c] = r.lo <= r.hi ? r.lo : static_cast<int>(terms_.slots() + 1);
  }
  return starts;
}

std::vector<double> MultiLevelDp::SuffixCosts() const {
  const int L = num_layers_;
  std::vector<double> suffix(L + 1, 0);
  for (int b = L - 1; b >= 0; --b) {
    double least = std::numeric_limits<double>::infinity();
    for (int c = b + 1; c <= L; ++c) {
      // (An empty row: no cell within its cap, in no schedule within it.)
      const CostRow row = Row(b, c);
      if (row.empty()) continue;
      const double forward = c < L ? terms_.ForwardMs(b, c) : 0.0;
      least = std::min(least, (double{row.last()} + forward) + suffix[c]);
    }
    suffix[b] = least;
  }
  return suffix;
}

int64_t MultiLevelDp::floor() const {
  const CostRow root = Row(0, num_layers_);
  return table_.empty() || root.empty() ? bounds_.floor(0, num_layers_) : root.lo;
}

DpSolution MultiLevelDp::Reconstruct(int64_t slots) const {
  const int L = num_layers_;
  DpSolution solution;
  solution.recompute_ms = Row(0, L).At(slots);
  OpEmitter emitter(L);
  Emit(0, L, 0, L, slots, &emitter);
  solution.ops = emitter.Finish();
  return solution;
}

void MultiLevelDp::Emit(int s, int t, int fs, int ft, int64_t m, OpEmitter* out) const {
  const int c = classes_.of(fs, ft);
  const int cs = classes_.canonical_s(c), ct = classes_.canonical_t(c);
  const int64_t mc = m - Shift(fs, ft);
  // The canonical interval's choice, with the rows its fill read.
  const IntervalChoice choice = Choose(cs, ct, mc);
  if (choice.split == 0) {
    out->ForwardWithGrad(s, terms_.mode(s, choice.mode));
    if (t > s + 1) Emit(s + 1, t, cs + 1, ct, mc - terms_.keep(cs, choice.mode), out);
    out->Backward(s);
  } else {
    const int split = s + (choice.split - cs);
    out->Sweep(s, split);
    Emit(split, t, choice.split, ct, mc - terms_.x(cs), out);
    Emit(s, split, cs, choice.split, mc, out);
  }
}

}  // namespace remat::solver
