// Device memory terms: the caching allocator's arithmetic, the plan's named
// terms, and the terms of a device preset with explicit overrides.
#include "remat/device/device_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "remat/device/devices.h"
#include "remat/io/checked_math.h"
#include "remat/io/units.h"

namespace remat {
namespace {

int64_t RoundUp(int64_t bytes, int64_t unit) { return (bytes + unit - 1) / unit * unit; }

int64_t SaturatingAdd(int64_t a, int64_t b) {
  const CheckedInt sum = CheckedInt(a) + CheckedInt(b);
  return sum.ok() ? sum.value() : kMaxBytes;
}

}  // namespace

int64_t RoundRequest(int64_t bytes, const CachingAllocatorModel& model) {
  return bytes <= 0 ? 0 : RoundUp(bytes, model.min_block_bytes);
}

void ReservedTally::ChangeRounded(int64_t bytes, int sign) {
  const int64_t rounded = RoundRequest(bytes, *model_);
  if (rounded <= model_->small_size_bytes) {
    small_rounded_ += sign * rounded;
  } else {
    large_reserved_ += sign * RoundUp(rounded, model_->large_round_bytes);
  }
}

int64_t ReservedTally::RoundedReserved() const {
  return large_reserved_ + RoundUp(small_rounded_, model_->small_segment_bytes);
}

DeviceMemoryUse AccountDeviceMemory(int64_t allocated_peak, int64_t rounded_peak,
                                    const DeviceMemoryTerms& terms) {
  DeviceMemoryUse u;
  u.allocated_peak_bytes = allocated_peak;
  u.allocator_rounding_bytes = std::max<int64_t>(0, rounded_peak - allocated_peak);
  const double fragment =
      std::ceil(terms.fragmentation_fraction() * static_cast<double>(rounded_peak));
  u.fragmentation_bytes =
      fragment >= static_cast<double>(kMaxBytes) ? kMaxBytes : static_cast<int64_t>(fragment);
  u.reserved_peak_bytes = SaturatingAdd(SaturatingAdd(allocated_peak, u.allocator_rounding_bytes),
                                        u.fragmentation_bytes);
  u.cuda_context_bytes = terms.cuda_context_bytes;
  u.workspace_bytes = terms.workspace_bytes;
  u.total_bytes = SaturatingAdd(u.reserved_peak_bytes, terms.fixed_bytes());
  return u;
}

DeviceMemoryUse AccountReplayedDeviceMemory(int64_t allocated_peak, int64_t replayed_reserved,
                                            const AllocatorReplaySummary& replay,
                                            const DeviceMemoryTerms& terms, double margin) {
  DeviceMemoryUse u;
  u.allocated_peak_bytes = allocated_peak;
  u.reserved_peak_bytes = std::max(allocated_peak, replayed_reserved);
  u.allocator_rounding_bytes = u.reserved_peak_bytes - allocated_peak;
  const double extra = std::ceil(margin * static_cast<double>(u.reserved_peak_bytes));
  u.replay_margin_bytes =
      extra >= static_cast<double>(kMaxBytes) ? kMaxBytes : static_cast<int64_t>(extra);
  u.cuda_context_bytes = terms.cuda_context_bytes;
  u.workspace_bytes = terms.workspace_bytes;
  u.total_bytes = SaturatingAdd(SaturatingAdd(u.reserved_peak_bytes, u.replay_margin_bytes),
                                terms.fixed_bytes());
  u.replay = replay;
  return u;
}

int64_t TensorBudget(int64_t budget_bytes, const DeviceMemoryTerms& terms) {
  if (budget_bytes <= 0) return budget_bytes;
  const int64_t left = budget_bytes - terms.fixed_bytes();
  if (left <= 0) return 1;
  const double tensors =
      std::floor(static_cast<double>(left) / (1.0 + terms.fragmentation_fraction()));
  return std::max<int64_t>(1, std::min<int64_t>(left, static_cast<int64_t>(tensors)));
}

Result<DeviceMemoryTerms> ResolveDeviceMemory(std::string_view device,
                                              const DeviceMemoryOverrides& overrides,
                                              std::string_view alloc_conf) {
  DeviceMemoryTerms t;
  if (!device.empty()) {
    REMAT_ASSIGN_OR_RETURN(const DeviceSpec spec, LookupDevice(device));
    t.cuda_context_bytes = spec.cuda_context_bytes;
    t.workspace_bytes = spec.workspace_bytes;
    t.caching_allocator = spec.caching_allocator;
    if (t.any()) t.source = spec.name + " preset";
  }
  const bool conf = alloc_conf.find_first_not_of(" \t") != std::string_view::npos;
  if (conf) {
    REMAT_ASSIGN_OR_RETURN(t.alloc_conf, ParseAllocConf(alloc_conf));
    t.alloc_conf_text = std::string(alloc_conf);
  }
  if (overrides.any() || conf) {
    if (overrides.cuda_context_bytes) t.cuda_context_bytes = *overrides.cuda_context_bytes;
    if (overrides.workspace_bytes) t.workspace_bytes = *overrides.workspace_bytes;
    if (overrides.fragmentation) t.fragmentation = overrides.fragmentation;
    t.caching_allocator = true;
    t.source = t.source.empty() ? "flags" : t.source + " with flags";
  }
  return t;
}

Result<int64_t> ParseTermBytes(std::string_view text) {
  if (text == "0" || text == "0B" || text == "0b") return 0;
  return ParseBytes(text);
}

Result<double> ParseFraction(std::string_view text) {
  const std::string s(text);
  const bool percent = !s.empty() && s.back() == '%';
  const std::string number = percent ? s.substr(0, s.size() - 1) : s;
  char* end = nullptr;
  const double x = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  const double fraction = percent ? x / 100.0 : x;
  if (number.empty() || *end != '\0' || !std::isfinite(x) || fraction < 0 || fraction > 0.5) {
    return Status::Invalid("expected a fraction from 0 to 50%, as 5% or 0.05, got '" + s + "'");
  }
  return fraction;
}

}  // namespace remat
