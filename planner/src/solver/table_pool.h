// Cost tables kept between solves: a table's storage, once its pages are
// touched, serves the next solve instead of being mapped and zeroed by the
// kernel again (a solve's tables are tens to hundreds of MB; the fit
// searches solve a profile many times, several at once). Internal to the
// solvers.
#ifndef REMAT_SRC_SOLVER_TABLE_POOL_H_
#define REMAT_SRC_SOLVER_TABLE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace remat::solver {

// Tables kept at most: as many as the fills that run at once (two per
// search, rounding down and up, on each of a few threads).
constexpr size_t kKeptTables = 4;

// An empty vector whose capacity holds `cells` floats: the smallest kept
// table that does, else a new one (the largest kept table dropped first,
// so that what is kept and in use stays near what was in use at once).
std::vector<float> TakeTable(int64_t cells);

// Keeps `table`'s storage for a later TakeTable: the kKeptTables largest
// tables given back are kept. Safe to call from any thread.
void GiveBackTable(std::vector<float> table);

// The tables kept now (for tests).
size_t KeptTables();

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_TABLE_POOL_H_
