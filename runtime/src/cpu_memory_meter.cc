// The CPU meter: a c10::Allocator wrapper that counts exact tensor bytes.
//
// Each block carries a 64-byte header holding its size, so the deleter knows
// what to subtract without a lookup table. The pointer handed out equals the
// DataPtr's context and raw_deleter() is set, as oneDNN's raw_allocate
// requires. Works with LibTorch 1.13 (const allocate) and 2.x (non-const
// allocate, copy_data): both signatures are declared, the base class picks.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "memory_meter.h"

namespace remat::runtime {
namespace {

constexpr size_t kHeader = 64;  // keeps c10's 64-byte alignment

// The timeline being recorded (memory_meter.h: StartCpuTimeline).
struct Recorder {
  std::mutex mutex;
  int64_t max_samples = 0;
  MeterTimeline timeline;
};

struct Counters {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> limit{0};
  std::mutex oom_mutex;
  std::optional<OomEvent> oom;
  std::atomic<bool> recording{false};
  Recorder recorder;
};

Counters& counters() {
  static Counters* c = new Counters();  // never destroyed: frees may run at exit
  return *c;
}

void RaisePeak(Counters& c, int64_t now) {
  int64_t seen = c.peak.load(std::memory_order_relaxed);
  while (now > seen && !c.peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

// Adds one event (`now`: bytes in use after it) to the timeline: into the
// last sample while its window of `stride` events is open, else a new
// sample; when the samples are full, adjacent pairs merge by their maximum
// and the stride doubles.
void Record(Recorder& r, int64_t now) {
  std::lock_guard<std::mutex> lock(r.mutex);
  MeterTimeline& t = r.timeline;
  std::vector<int64_t>& samples = t.bytes;
  int64_t window = t.events / t.stride;
  if (window == static_cast<int64_t>(samples.size()) && window == r.max_samples) {
    const size_t merged = (samples.size() + 1) / 2;
    for (size_t i = 0; i < merged; ++i) {
      const size_t j = 2 * i;
      samples[i] = j + 1 < samples.size() ? std::max(samples[j], samples[j + 1]) : samples[j];
    }
    samples.resize(merged);
    t.stride *= 2;
    window = t.events / t.stride;
  }
  if (window == static_cast<int64_t>(samples.size())) {
    samples.push_back(now);
  } else {
    samples.back() = std::max(samples.back(), now);
  }
  ++t.events;
}

void DeleteBlock(void* ptr) {
  if (ptr == nullptr) return;
  char* base = static_cast<char*>(ptr) - kHeader;
  int64_t bytes = 0;
  std::memcpy(&bytes, base, sizeof(bytes));
  Counters& c = counters();
  const int64_t now = c.current.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
  if (c.recording.load(std::memory_order_relaxed)) Record(c.recorder, now);
  c10::free_cpu(base);
}

c10::DataPtr AllocateBlock(size_t n) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (n == 0) return {nullptr, nullptr, &DeleteBlock, cpu};
  Counters& c = counters();
  const int64_t bytes = static_cast<int64_t>(n);
  const int64_t now = c.current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  const int64_t limit = c.limit.load(std::memory_order_relaxed);
  if (limit > 0 && now > limit) {
    c.current.fetch_sub(bytes, std::memory_order_relaxed);
    const int64_t in_use = now - bytes;
    {
      std::lock_guard<std::mutex> lock(c.oom_mutex);
      c.oom = OomEvent{bytes, in_use, limit};
    }
    TORCH_CHECK_WITH(OutOfMemoryError, false, "remat memory limit: cannot allocate ", bytes,
                     " bytes with ", in_use, " in use (limit ", limit, ")");
  }
  RaisePeak(c, now);
  char* base = nullptr;
  try {
    base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
  } catch (...) {
    c.current.fetch_sub(bytes, std::memory_order_relaxed);
    throw;
  }
  if (c.recording.load(std::memory_order_relaxed)) Record(c.recorder, now);
  std::memcpy(base, &bytes, sizeof(bytes));
  void* data = base + kHeader;
  return {data, data, &DeleteBlock, cpu};
}

class MeteringCpuAllocator final : public c10::Allocator {
 public:
  // LibTorch 1.13 declares `allocate(size_t) const`, 2.x `allocate(size_t)`;
  // whichever is virtual in the base is overridden, the other is unused.
  c10::DataPtr allocate(size_t n) const { return AllocateBlock(n); }
  c10::DataPtr allocate(size_t n) { return AllocateBlock(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &DeleteBlock; }
  // Pure virtual in LibTorch 2.x; unused by 1.13.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }
};

class CpuMeterImpl final : public MemoryMeter {
 public:
  CpuMeterImpl() {
    static MeteringCpuAllocator allocator;
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
    installed_ = c10::GetCPUAllocator() == &allocator;
  }
  std::string name() const override {
    return installed_ ? "cpu allocator meter" : "cpu allocator meter (NOT INSTALLED)";
  }
  int64_t current_bytes() const override { return counters().current.load(); }
  int64_t peak_bytes() const override { return counters().peak.load(); }
  void ResetPeak() override { counters().peak.store(counters().current.load()); }
  Status SetLimit(int64_t bytes) override {
    if (!installed_) {
      return Status::Internal("the metering CPU allocator could not be registered");
    }
    counters().limit.store(bytes > 0 ? bytes : 0);
    return Status::Ok();
  }
  int64_t limit_bytes() const override { return counters().limit.load(); }
  bool installed() const { return installed_; }
  std::optional<OomEvent> TakeOom() override {
    std::lock_guard<std::mutex> lock(counters().oom_mutex);
    std::optional<OomEvent> e = counters().oom;
    counters().oom.reset();
    return e;
  }

 private:
  bool installed_ = false;
};

CpuMeterImpl& Meter() {
  static CpuMeterImpl* meter = new CpuMeterImpl();
  return *meter;
}

}  // namespace

MemoryMeter& CpuMeter() { return Meter(); }

bool CpuMeterAllocated(const void* storage_impl) {
  if (storage_impl == nullptr) return false;
  const auto* storage = static_cast<const c10::StorageImpl*>(storage_impl);
  return storage->data_ptr().get_deleter() == &DeleteBlock;
}

Status StartCpuTimeline(int64_t max_samples) {
  if (max_samples < 1) {
    return Status::Invalid("timeline max_samples must be at least 1, got " +
                           std::to_string(max_samples));
  }
  if (!Meter().installed()) {
    return Status::Internal("the metering CPU allocator could not be registered");
  }
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(c.recorder.mutex);
  c.recorder.max_samples = max_samples;
  c.recorder.timeline = MeterTimeline{};
  c.recorder.timeline.bytes.reserve(static_cast<size_t>(std::min<int64_t>(max_samples, 1 << 16)));
  c.recording.store(true);
  return Status::Ok();
}

MeterTimeline StopCpuTimeline() {
  Counters& c = counters();
  c.recording.store(false);
  std::lock_guard<std::mutex> lock(c.recorder.mutex);
  MeterTimeline t = std::move(c.recorder.timeline);
  c.recorder.timeline = MeterTimeline{};
  return t;
}

}  // namespace remat::runtime
