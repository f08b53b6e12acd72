#include "cuda_meter_core.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace remat::runtime {
namespace {

class CudaMeter final : public MemoryMeter {
 public:
  explicit CudaMeter(std::unique_ptr<CudaAllocatorBackend> backend)
      : backend_(std::move(backend)) {}
  std::string name() const override { return "cuda caching allocator stats"; }
  int64_t current_bytes() const override { return backend_->Stats().allocated; }
  int64_t peak_bytes() const override { return backend_->Stats().allocated_peak; }
  int64_t reserved_bytes() const override { return backend_->Stats().reserved; }
  int64_t reserved_peak_bytes() const override { return backend_->Stats().reserved_peak; }
  void ResetPeak() override { backend_->ResetPeakStats(); }
  int64_t AllocationBytes(int64_t nbytes) const override { return CudaBlockBytes(nbytes); }
  Status SetLimit(int64_t bytes) override {
    limit_ = bytes > 0 ? bytes : 0;
    backend_->SetMemoryFraction(MemoryFractionFor(limit_, backend_->TotalBytes()));
    return Status::Ok();
  }
  int64_t limit_bytes() const override { return limit_; }
  std::optional<OomEvent> TakeOom() override { return std::nullopt; }

 private:
  std::unique_ptr<CudaAllocatorBackend> backend_;
  int64_t limit_ = 0;
};

}  // namespace

std::unique_ptr<MemoryMeter> MakeCudaMeterOn(std::unique_ptr<CudaAllocatorBackend> backend) {
  return std::make_unique<CudaMeter>(std::move(backend));
}

int64_t CudaBlockBytes(int64_t nbytes) { return nbytes <= 0 ? 0 : (nbytes + 511) / 512 * 512; }

double MemoryFractionFor(int64_t limit_bytes, int64_t total_bytes) {
  if (limit_bytes <= 0 || total_bytes <= 0) return 1.0;
  return std::min(1.0, static_cast<double>(limit_bytes) / static_cast<double>(total_bytes));
}

std::optional<int64_t> ParseCudaOomRequestBytes(const std::string& message) {
  static const std::string kKey = "Tried to allocate ";
  const size_t at = message.find(kKey);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = message.c_str() + at + kKey.size();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(value) || value < 0) return std::nullopt;
  const std::string rest(end);
  struct Unit {
    const char* name;
    double bytes;
  };
  // c10's format_size: bytes, KiB, MiB, GiB, TiB (a space before the unit).
  for (const Unit u : {Unit{" TiB", 1099511627776.0}, Unit{" GiB", 1073741824.0},
                       Unit{" MiB", 1048576.0}, Unit{" KiB", 1024.0}, Unit{" bytes", 1.0}}) {
    if (rest.rfind(u.name, 0) == 0) return static_cast<int64_t>(std::llround(value * u.bytes));
  }
  return std::nullopt;
}

}  // namespace remat::runtime
