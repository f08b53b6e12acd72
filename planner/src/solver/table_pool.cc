// The solvers' kept cost tables (table_pool.h).
#include "solver/table_pool.h"

#include <algorithm>
#include <mutex>
#include <utility>

namespace remat::solver {
namespace {

std::mutex& PoolMutex() {
  static std::mutex m;
  return m;
}

// Ordered by capacity, smallest first.
std::vector<std::vector<float>>& Pool() {
  static std::vector<std::vector<float>> pool;
  return pool;
}

// The TablePoolScopes open.
int& OpenScopes() {
  static int open = 0;
  return open;
}

}  // namespace

std::vector<float> TakeTable(int64_t cells) {
  const size_t need = static_cast<size_t>(std::max<int64_t>(cells, 0));
  std::vector<float> out, dropped;  // `dropped` freed after the lock is let go
  {
    const std::lock_guard<std::mutex> lock(PoolMutex());
    std::vector<std::vector<float>>& pool = Pool();
    const auto it = std::find_if(pool.begin(), pool.end(), [&](const std::vector<float>& t) {
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
  dropped = std::vector<float>();
  out.reserve(need);
  return out;
}

void GiveBackTable(std::vector<float> table) {
  if (table.capacity() == 0) return;
  std::vector<float> dropped;
  {
    const std::lock_guard<std::mutex> lock(PoolMutex());
    if (OpenScopes() == 0) {
      dropped = std::move(table);  // freed after the lock is let go
      return;
    }
    std::vector<std::vector<float>>& pool = Pool();
    const auto at = std::find_if(pool.begin(), pool.end(), [&](const std::vector<float>& t) {
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
  std::vector<std::vector<float>> freed;  // freed after the lock is let go
  const std::lock_guard<std::mutex> lock(PoolMutex());
  if (--OpenScopes() == 0) freed.swap(Pool());
}

size_t KeptTables() {
  const std::lock_guard<std::mutex> lock(PoolMutex());
  return Pool().size();
}

}  // namespace remat::solver
