// Node recycling for the allocator's ordered pools: the std::set nodes of
// one element type, handed out from chunks and kept on a free list when
// freed, so a pool's insert and erase call no malloc.
#ifndef REMAT_ALLOCATOR_NODE_STORE_H_
#define REMAT_ALLOCATOR_NODE_STORE_H_

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace remat::allocator_internal {

// Nodes of one size (the first asked for, up to 16 KiB) from 16 KiB chunks,
// a freed one reused first; a request of another size goes to operator new.
class NodeStore {
 public:
  NodeStore() = default;
  NodeStore(const NodeStore&) = delete;
  NodeStore& operator=(const NodeStore&) = delete;
  void* Allocate(size_t bytes) {
    if (node_bytes_ == 0) node_bytes_ = bytes;
    if (!Pooled(bytes)) return ::operator new(bytes);
    if (free_ != nullptr) {
      void* p = free_;
      free_ = *static_cast<void**>(p);
      return p;
    }
    const size_t stride = (bytes + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) *
                          alignof(std::max_align_t);
    if (chunks_.empty() || used_ + stride > kChunkBytes) {
      chunks_.push_back(
          std::make_unique<std::max_align_t[]>(kChunkBytes / sizeof(std::max_align_t)));
      used_ = 0;
    }
    void* p = reinterpret_cast<char*>(chunks_.back().get()) + used_;
    used_ += stride;
    return p;
  }
  void Deallocate(void* p, size_t bytes) {
    if (!Pooled(bytes)) {
      ::operator delete(p);
      return;
    }
    *static_cast<void**>(p) = free_;
    free_ = p;
  }

 private:
  static constexpr size_t kChunkBytes = 16384;
  bool Pooled(size_t bytes) const { return bytes == node_bytes_ && bytes <= kChunkBytes; }
  std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
  size_t used_ = 0;
  size_t node_bytes_ = 0;
  void* free_ = nullptr;
};

template <class T>
struct NodeAllocator {
  using value_type = T;
  explicit NodeAllocator(NodeStore* s) : store(s) {}
  template <class U>
  NodeAllocator(const NodeAllocator<U>& o) : store(o.store) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(store->Allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { store->Deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const NodeAllocator<U>& o) const {
    return store == o.store;
  }
  template <class U>
  bool operator!=(const NodeAllocator<U>& o) const {
    return store != o.store;
  }
  NodeStore* store;
};

}  // namespace remat::allocator_internal

#endif  // REMAT_ALLOCATOR_NODE_STORE_H_
