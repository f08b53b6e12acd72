// Cost tables kept between solves: a table's storage, once its pages are
// touched, serves the next solve instead of being mapped and zeroed by the
// kernel again (a solve's tables are tens to hundreds of MB; the fit
// searches solve a profile many times, several at once). Tables are kept
// only while a TablePoolScope is open (a planning run: RunPlanner), and
// freed when the last one closes, so a long-lived process (the Python
// module) holds none between runs. Internal to the solvers.
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

// Keeps `table`'s storage for a later TakeTable while a TablePoolScope is
// open (else frees it): the kKeptTables largest tables given back are
// kept. Safe to call from any thread.
void GiveBackTable(std::vector<float> table);

// While one is open (on any thread), tables given back are kept; closing
// the last one frees them.
class TablePoolScope {
 public:
  TablePoolScope();
  ~TablePoolScope();
  TablePoolScope(const TablePoolScope&) = delete;
  TablePoolScope& operator=(const TablePoolScope&) = delete;
};

// The tables kept now (for tests).
size_t KeptTables();

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_TABLE_POOL_H_
