// Activation offload's host memory: where a checkpoint x[i] lives between
// its kOffload and its kPrefetch (schedule.h).
//
// CPU: the pool's buffers come from c10::alloc_cpu, wrapped by at::from_blob
// with the pool's own deleter, so the metering CPU allocator
// (cpu_memory_meter.cc) never sees them: an offloaded checkpoint leaves the
// measured device bytes by exactly its storage's bytes, and a prefetch
// allocates them again through the metered allocator. Copies are memcpys in
// line, timed by the executor like any op.
// CUDA (a CUDA LibTorch build): pinned host buffers and a side stream from
// c10's pool; copies are non_blocking on the side stream, which first waits
// for the compute stream's work (an event). The offloaded device storage is
// marked used by the side stream (record_stream), so the caching allocator
// reuses its bytes only after the copy; a prefetch records an event that
// the readers of the tensor wait on (AwaitPrefetch) before they run.
//
// The whole storage moves, byte for byte, with the tensor's sizes, strides,
// offset and dtype, so what comes back equals what left and allocates what
// the storage held. Host bytes are counted per pool (bytes, peak_bytes).
#ifndef REMAT_RUNTIME_SRC_HOST_POOL_H_
#define REMAT_RUNTIME_SRC_HOST_POOL_H_

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>
#include <unordered_map>

namespace remat::runtime {

class HostPool {
 public:
  // A pool for tensors of `device` (CPU, or CUDA in a CUDA LibTorch build;
  // otherwise the first copy throws).
  explicit HostPool(const c10::Device& device);
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // Copies `device_tensor`'s storage into host memory as tensor `index`
  // (the caller then drops its reference, releasing the device bytes).
  // Requires that the caller's reference is the only holder of the storage
  // (else its device bytes would stay) and that `index` is not held;
  // throws std::invalid_argument otherwise. A tensor without bytes (an
  // empty pass boundary) is kept as it is.
  void Offload(int index, const at::Tensor& device_tensor);

  // Tensor `index` back on the device (newly allocated there, the host
  // bytes released); throws std::invalid_argument if the pool does not hold
  // it. On CUDA its copy may still run: readers call AwaitPrefetch first.
  at::Tensor Prefetch(int index);

  // Makes the current stream wait for tensor `index`'s last prefetch (CUDA);
  // nothing on CPU or when none is pending.
  void AwaitPrefetch(int index);

  // Releases tensor `index`'s host bytes (a kFree of an offloaded tensor);
  // nothing if the pool does not hold it.
  void Release(int index);

  bool holds(int index) const { return held_.count(index) > 0; }
  // Host bytes held now, and the most held since the last ResetPeak().
  int64_t bytes() const { return bytes_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  void ResetPeak() { peak_bytes_ = bytes_; }
  // Releases everything held and pending.
  void Clear();

  // Bytes of host buffers that CPU pools allocated and that are still alive
  // (held, or a tensor made from one still referenced), all pools together.
  static int64_t CpuBufferBytes();

 private:
  struct Held;   // a storage on the host and what rebuilds the tensor
  struct Event;  // CUDA: an event on the side stream
  at::Tensor HostBytes(int64_t n) const;
  // Copies `from` into `to` (byte tensors of one size): in line on CPU, on
  // the side stream on CUDA; returns the copy's event (CUDA) or null.
  std::unique_ptr<Event> Copy(const at::Tensor& to, const at::Tensor& from);

  c10::Device device_;
  c10::Stream side_;  // the copy stream (CUDA); unused on CPU
  std::unordered_map<int, std::unique_ptr<Held>> held_;
  std::unordered_map<int, std::unique_ptr<Event>> prefetching_;
  int64_t bytes_ = 0;
  int64_t peak_bytes_ = 0;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_HOST_POOL_H_
