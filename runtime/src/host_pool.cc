#include "host_pool.h"

#include <c10/core/GradMode.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifdef REMAT_HAVE_CUDA_TORCH
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace remat::runtime {

struct HostPool::Held {
  at::Tensor host;  // the storage's bytes (uint8), or the tensor itself if it has none
  int64_t bytes = 0;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  caffe2::TypeMeta dtype;
};

#ifdef REMAT_HAVE_CUDA_TORCH
struct HostPool::Event {
  at::cuda::CUDAEvent event;
};
#else
struct HostPool::Event {};
#endif

namespace {

c10::Stream SideStream(const c10::Device& device) {
#ifdef REMAT_HAVE_CUDA_TORCH
  if (device.is_cuda())
    return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
#endif
  return c10::Stream(c10::Stream::DEFAULT, device);
}

// A byte view of `t`'s whole storage.
at::Tensor StorageBytes(const at::Tensor& t, int64_t n) {
  return at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {n}, {1});
}

// Bytes of the CPU pools' buffers alive, all pools.
std::atomic<int64_t> cpu_buffer_bytes{0};

}  // namespace

HostPool::HostPool(const c10::Device& device) : device_(device), side_(SideStream(device)) {}

HostPool::~HostPool() = default;

int64_t HostPool::CpuBufferBytes() { return cpu_buffer_bytes.load(); }

at::Tensor HostPool::HostBytes(int64_t n) const {
  if (device_.is_cuda()) {
    return at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  }
  // Outside the metered allocator: the pool's own memory and deleter.
  void* data = c10::alloc_cpu(static_cast<size_t>(n));
  cpu_buffer_bytes += n;
  const auto free = [n](void* p) {
    c10::free_cpu(p);
    cpu_buffer_bytes -= n;
  };
  return at::from_blob(data, {n}, free, at::TensorOptions().dtype(at::kByte));
}

std::unique_ptr<HostPool::Event> HostPool::Copy(const at::Tensor& to, const at::Tensor& from) {
  if (!device_.is_cuda()) {
    to.copy_(from);
    return nullptr;
  }
#ifdef REMAT_HAVE_CUDA_TORCH
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  const c10::cuda::CUDAStream side(c10::cuda::CUDAStream::UNCHECKED, side_);
  // The side stream starts after the compute stream's work so far: the
  // source was written there, and a new device buffer's bytes may have
  // been read there last.
  at::cuda::CUDAEvent issued;
  issued.record(compute);
  issued.block(side);
  {
    const c10::cuda::CUDAStreamGuard guard(side);
    to.copy_(from, /*non_blocking=*/true);
  }
  auto done = std::make_unique<Event>();
  done->event.record(side);
  return done;
#else
  throw std::invalid_argument("offload on " + device_.str() + " needs a CUDA LibTorch build");
#endif
}

void HostPool::Offload(int index, const at::Tensor& device_tensor) {
  const std::string name = "x" + std::to_string(index);
  if (holds(index)) throw std::invalid_argument("offloads " + name + ", which is on the host");
  if (!device_tensor.defined()) throw std::invalid_argument("offloads " + name + ", not live");
  const c10::AutoGradMode no_grad(false);
  auto held = std::make_unique<Held>();
  const int64_t n = static_cast<int64_t>(device_tensor.storage().nbytes());
  if (n == 0) {
    held->host = device_tensor;  // nothing to move
  } else {
    if (device_tensor.use_count() != 1 || device_tensor.storage().use_count() != 1) {
      throw std::invalid_argument("offloads " + name +
                                  ", whose storage is also held elsewhere (its device bytes "
                                  "would stay)");
    }
    held->host = HostBytes(n);
    Copy(held->host, StorageBytes(device_tensor, n));
    // Released by the caller; on CUDA the allocator reuses the bytes only
    // after the side stream's copy.
    if (device_.is_cuda()) device_tensor.record_stream(side_);
    held->bytes = n;
    held->sizes = device_tensor.sizes().vec();
    held->strides = device_tensor.strides().vec();
    held->offset = device_tensor.storage_offset();
    held->dtype = device_tensor.dtype();
  }
  bytes_ += n;
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  held_[index] = std::move(held);
}

at::Tensor HostPool::Prefetch(int index) {
  const auto it = held_.find(index);
  if (it == held_.end()) {
    throw std::invalid_argument("prefetches x" + std::to_string(index) +
                                ", which is not on the host");
  }
  const c10::AutoGradMode no_grad(false);
  const Held& h = *it->second;
  at::Tensor out = h.host;
  if (h.bytes > 0) {
    const at::Tensor bytes =
        at::empty({h.bytes}, at::TensorOptions().dtype(at::kByte).device(device_));
    std::unique_ptr<Event> done = Copy(bytes, h.host);
    if (done != nullptr) {
      bytes.record_stream(side_);  // written there; freed only after the copy
      prefetching_[index] = std::move(done);
    }
    out = at::empty({0}, at::TensorOptions().dtype(h.dtype).device(device_))
              .set_(bytes.storage(), h.offset, h.sizes, h.strides);
  }
  bytes_ -= h.bytes;
  held_.erase(it);
  return out;
}

void HostPool::AwaitPrefetch(int index) {
  const auto it = prefetching_.find(index);
  if (it == prefetching_.end()) return;
#ifdef REMAT_HAVE_CUDA_TORCH
  it->second->event.block(c10::cuda::getCurrentCUDAStream(device_.index()));
#endif
  prefetching_.erase(it);
}

void HostPool::Release(int index) {
  const auto it = held_.find(index);
  if (it == held_.end()) return;
  bytes_ -= it->second->bytes;
  held_.erase(it);
}

void HostPool::Clear() {
  held_.clear();
  prefetching_.clear();
  bytes_ = 0;
  peak_bytes_ = 0;
}

}  // namespace remat::runtime
