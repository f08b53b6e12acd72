// The CUDA meter's logic without a GPU: a fake caching allocator behind
// CudaAllocatorBackend, c10's DeviceStats as the real backend reads them,
// and the out-of-memory message of the caching allocator.
#include "cuda_meter_core.h"

#include <c10/core/Allocator.h>
#include <gtest/gtest.h>

#include "cuda_stats.h"
#include "torch_errors.h"

namespace remat::runtime {
namespace {

struct FakeAllocator {
  CudaAllocatorStats stats;
  int64_t total = 80LL << 30;
  double fraction = 1.0;
  int resets = 0;
};

class FakeBackend final : public CudaAllocatorBackend {
 public:
  explicit FakeBackend(FakeAllocator* a) : a_(a) {}
  CudaAllocatorStats Stats() const override { return a_->stats; }
  void ResetPeakStats() override {
    ++a_->resets;
    a_->stats.allocated_peak = a_->stats.allocated;
    a_->stats.reserved_peak = a_->stats.reserved;
  }
  int64_t TotalBytes() const override { return a_->total; }
  void SetMemoryFraction(double f) override { a_->fraction = f; }

 private:
  FakeAllocator* a_;
};

TEST(CudaMeterCore, ReadsAllocatedAndReservedBytes) {
  FakeAllocator a;
  a.stats = {1000, 5000, 2 << 20, 4 << 20};
  std::unique_ptr<MemoryMeter> m = MakeCudaMeterOn(std::make_unique<FakeBackend>(&a));
  EXPECT_EQ(m->current_bytes(), 1000);
  EXPECT_EQ(m->peak_bytes(), 5000);
  EXPECT_EQ(m->reserved_bytes(), 2 << 20);
  EXPECT_EQ(m->reserved_peak_bytes(), 4 << 20);
  m->ResetPeak();
  EXPECT_EQ(a.resets, 1);
  EXPECT_EQ(m->peak_bytes(), 1000);
  EXPECT_FALSE(m->TakeOom().has_value());
}

TEST(CudaMeterCore, RoundsAllocationsTo512ByteBlocks) {
  EXPECT_EQ(CudaBlockBytes(0), 0);
  EXPECT_EQ(CudaBlockBytes(-4), 0);
  EXPECT_EQ(CudaBlockBytes(1), 512);
  EXPECT_EQ(CudaBlockBytes(512), 512);
  EXPECT_EQ(CudaBlockBytes(513), 1024);
  EXPECT_EQ(CudaBlockBytes(4 << 20), 4 << 20);
  FakeAllocator a;
  EXPECT_EQ(MakeCudaMeterOn(std::make_unique<FakeBackend>(&a))->AllocationBytes(1000), 1024);
}

TEST(CudaMeterCore, CapIsAFractionOfTheDevice) {
  FakeAllocator a;
  a.total = 100 << 20;
  std::unique_ptr<MemoryMeter> m = MakeCudaMeterOn(std::make_unique<FakeBackend>(&a));
  ASSERT_TRUE(m->SetLimit(25 << 20).ok());
  EXPECT_DOUBLE_EQ(a.fraction, 0.25);
  EXPECT_EQ(m->limit_bytes(), 25 << 20);
  ASSERT_TRUE(m->SetLimit(200 << 20).ok());  // more than the device: no cap below it
  EXPECT_DOUBLE_EQ(a.fraction, 1.0);
  ASSERT_TRUE(m->SetLimit(0).ok());
  EXPECT_DOUBLE_EQ(a.fraction, 1.0);
  EXPECT_EQ(m->limit_bytes(), 0);
  EXPECT_DOUBLE_EQ(MemoryFractionFor(-1, 100), 1.0);
  EXPECT_DOUBLE_EQ(MemoryFractionFor(50, 0), 1.0);
}

TEST(CudaStats, TakesTheAggregateOfAllPools) {
  c10::CachingDeviceAllocator::DeviceStats d;
  using c10::CachingAllocator::StatType;
  auto at = [](StatType t) { return static_cast<size_t>(t); };
  d.allocated_bytes[at(StatType::AGGREGATE)].current = 3072;
  d.allocated_bytes[at(StatType::AGGREGATE)].peak = 8192;
  d.allocated_bytes[at(StatType::SMALL_POOL)].current = 1024;
  d.allocated_bytes[at(StatType::LARGE_POOL)].current = 2048;
  d.reserved_bytes[at(StatType::AGGREGATE)].current = 2 << 20;
  d.reserved_bytes[at(StatType::AGGREGATE)].peak = 22 << 20;
  d.reserved_bytes[at(StatType::LARGE_POOL)].peak = 20 << 20;
  const CudaAllocatorStats s = StatsOf(d);
  EXPECT_EQ(s.allocated, 3072);
  EXPECT_EQ(s.allocated_peak, 8192);
  EXPECT_EQ(s.reserved, 2 << 20);
  EXPECT_EQ(s.reserved_peak, 22 << 20);
}

std::string CudaOomMessage(uint64_t bytes) {
  // As c10/cuda/CUDACachingAllocator.cpp words it.
  return "CUDA out of memory. Tried to allocate " + c10::CachingAllocator::format_size(bytes) +
         ". GPU 0 has a total capacity of 139.72 GiB of which 1.50 GiB is free.";
}

TEST(CudaOomMessage, ParsesTheRequestInEveryUnit) {
  for (const uint64_t bytes : {512ULL, 1000ULL, 4096ULL, 3ULL << 20, 20ULL << 20, 123456789ULL,
                               5ULL << 30, 70000000000ULL}) {
    const std::optional<int64_t> parsed = ParseCudaOomRequestBytes(CudaOomMessage(bytes));
    ASSERT_TRUE(parsed.has_value()) << CudaOomMessage(bytes);
    EXPECT_NEAR(static_cast<double>(*parsed), static_cast<double>(bytes), 0.005 * bytes)
        << CudaOomMessage(bytes);
  }
  EXPECT_FALSE(ParseCudaOomRequestBytes("remat memory limit: cannot allocate 4 bytes"));
  EXPECT_FALSE(ParseCudaOomRequestBytes("Tried to allocate lots"));
  EXPECT_FALSE(ParseCudaOomRequestBytes("Tried to allocate 2.00 parsecs"));
}

TEST(CudaOomMessage, OneLineNamesTheRequestAndTheCap) {
  FakeAllocator a;
  a.stats.allocated = 3 << 20;
  std::unique_ptr<MemoryMeter> m = MakeCudaMeterOn(std::make_unique<FakeBackend>(&a));
  ASSERT_TRUE(m->SetLimit(4 << 20).ok());
  const Status s =
      OutOfMemoryStatus("step 1, schedule op 4", std::nullopt, *m, CudaOomMessage(2 << 20));
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(s.message().rfind("out of memory at step 1, schedule op 4: asked for 2.00 MiB with "
                              "3.00 MiB (3,145,728 bytes) in use; the limit is 4.00 MiB",
                              0),
            0u)
      << s.message();
}

}  // namespace
}  // namespace remat::runtime
