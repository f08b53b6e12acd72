// The solvers' kept cost tables (table_pool.h).
#include "solver/table_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <utility>

namespace remat::solver {
namespace {

// The size of a transparent huge page on x86-64.
constexpr size_t kHugePageBytes = size_t{2} << 20;

std::mutex& PoolMutex() {
  static std::mutex m;
  return m;
}

// Ordered by capacity, smallest first.
std::vector<CostTable>& Pool() {
  static std::vector<CostTable> pool;
  return pool;
}

// The TablePoolScopes open.
int& OpenScopes() {
  static int open = 0;
  return open;
}

}  // namespace

void* AllocateTableBytes(size_t bytes) {
  if (bytes < kHugePageBytes) return ::operator new(bytes);
  void* p = ::operator new(bytes, std::align_val_t{kHugePageBytes});
  // Advice only (huge pages may be off or used up): the storage is the
  // same either way.
  madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  return p;
}

// The unsized deletes: clang without -fsized-deallocation (the sanitizer
// builds) declares no sized ones.
void FreeTableBytes(void* p, size_t bytes) noexcept {
  if (bytes < kHugePageBytes) {
    ::operator delete(p);
  } else {
    ::operator delete(p, std::align_val_t{kHugePageBytes});
  }
}

CostTable TakeTable(int64_t cells) {
  const size_t need = static_cast<size_t>(std::max<int64_t>(cells, 0));
  CostTable out, dropped;  // `dropped` freed after the lock is let go
  {
    const std::lock_guard<std::mutex> lock(PoolMutex());
    std::vector<CostTable>& pool = Pool();
    const auto it = std::find_if(pool.begin(), pool.end(), [&](const CostTable& t) {
      return t.capacity() >= need;
    });
    if (it != pool.end()) {
      out = std::move(*it);
      pool.erase(it);
      out.clear();
      return out;
    }
    if (!pool.empty()) {
      dropped = std::move(pool.back());
      pool.pop_back();
    }
  }
  dropped = CostTable();
  out.reserve(need);
  return out;
}

void GiveBackTable(CostTable table) {
  if (table.capacity() == 0) return;
  CostTable dropped;
  {
    const std::lock_guard<std::mutex> lock(PoolMutex());
    if (OpenScopes() == 0) {
      dropped = std::move(table);  // freed after the lock is let go
      return;
    }
    std::vector<CostTable>& pool = Pool();
    const auto at = std::find_if(pool.begin(), pool.end(), [&](const CostTable& t) {
      return t.capacity() > table.capacity();
    });
    pool.insert(at, std::move(table));
    if (pool.size() > kKeptTables) {
      dropped = std::move(pool.front());
      pool.erase(pool.begin());
    }
  }
}

TablePoolScope::TablePoolScope() {
  const std::lock_guard<std::mutex> lock(PoolMutex());
  ++OpenScopes();
}

TablePoolScope::~TablePoolScope() {
  std::vector<CostTable> freed;  // freed after the lock is let go
  const std::lock_guard<std::mutex> lock(PoolMutex());
  if (--OpenScopes() == 0) freed.swap(Pool());
}

size_t KeptTables() {
  const std::lock_guard<std::mutex> lock(PoolMutex());
  return Pool().size();
}

}  // namespace remat::solver
