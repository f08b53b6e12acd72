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
#include <new>
#include <utility>
#include <vector>

namespace remat::solver {

// Storage of `bytes` for a cost table, aligned to huge pages and advised to
// use them when it spans one; given back by FreeTableBytes with the same
// size.
void* AllocateTableBytes(size_t bytes);
void FreeTableBytes(void* p, size_t bytes) noexcept;

// The storage of a cost table: floats that a resize leaves unwritten (the
// fill writes every cell it reads, so writing them first only touches the
// pages twice), in memory the kernel may back with huge pages where the
// table spans at least one (a table of hundreds of MB otherwise takes a
// page fault per 4 KiB as it is first written).
template <typename T>
class TableAllocator {
 public:
  using value_type = T;
  TableAllocator() = default;
  template <typename U>
  TableAllocator(const TableAllocator<U>&) noexcept {}  // NOLINT(runtime/explicit)
  T* allocate(size_t n) { return static_cast<T*>(AllocateTableBytes(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { FreeTableBytes(p, n * sizeof(T)); }
  // Default-initialised: no value written.
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const TableAllocator&, const TableAllocator&) { return true; }
  friend bool operator!=(const TableAllocator&, const TableAllocator&) { return false; }
};

// A cost table: resize(n) leaves the cells unwritten.
using CostTable = std::vector<float, TableAllocator<float>>;

// Tables kept at most: as many as the fills that run at once (two per
// search, rounding down and up, on each of a few threads).
constexpr size_t kKeptTables = 4;

// An empty vector whose capacity holds `cells` floats: the smallest kept
// table that does, else a new one (the largest kept table dropped first,
// so that what is kept and in use stays near what was in use at once).
CostTable TakeTable(int64_t cells);

// Keeps `table`'s storage for a later TakeTable while a TablePoolScope is
// open (else frees it): the kKeptTables largest tables given back are
// kept. Safe to call from any thread.
void GiveBackTable(CostTable table);

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
