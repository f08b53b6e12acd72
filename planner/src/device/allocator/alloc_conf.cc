// PYTORCH_CUDA_ALLOC_CONF parsing: the keys, values and checks of PyTorch's
// AcceleratorAllocatorConfig::parseArgs (c10/core/AllocatorConfig.cpp) and
// CUDAAllocatorConfig::parseArgs (c10/cuda/CUDAAllocatorConfig.cpp), with
// errors as values.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kMaxMiB = kAllocUnlimited / kMiB;

// "key1:v1,key2:[a:b,>:c]" -> key1 : v1 , key2 : [ a : b , > : c ]; spaces dropped.
std::vector<std::string> Tokenize(std::string_view conf) {
  std::vector<std::string> tokens;
  std::string word;
  for (char ch : conf) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, ch);
    } else if (!std::isspace(static_cast<unsigned char>(ch))) {
      word += ch;
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

Status Bad(const std::string& key, const std::string& value, const std::string& accepted) {
  return Status::Invalid("allocator config: " + key + ":" + value + ": " + accepted);
}

bool IsSeparator(const std::string& token) {
  return token == "," || token == ":" || token == "[" || token == "]";
}

bool IsPowerOf2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// A non-negative decimal integer, saturating at kMaxMiB (PyTorch clamps MB
// values to what fits in bytes).
std::optional<int64_t> ParseCount(const std::string& text) {
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value > kMaxMiB ? kMaxMiB + 1 : value * 10 + (c - '0');
  }
  return value;
}

std::optional<double> ParseNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

class ConfParser {
 public:
  explicit ConfParser(std::string_view conf) : tokens_(Tokenize(conf)) {}

  Result<AllocatorOptions> Parse() {
    // large_segment_size_mb first: the other sizes are checked against it.
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i] != "large_segment_size_mb") continue;
      REMAT_ASSIGN_OR_RETURN(const std::string value, ScalarValue(i));
      const auto mb = ParseCount(value);
      if (!mb || *mb <= kAllocMinLargeAllocBytes / kMiB) {
        return Bad(tokens_[i], value, "accepted: an integer number of MiB > 10");
      }
      options_.large_segment_bytes = std::min(*mb, kMaxMiB) * kMiB;
    }
    options_.max_non_split_rounding_bytes = options_.large_segment_bytes;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const std::string& key = tokens_[i];
      if (key == "roundup_power2_divisions") {
        REMAT_ASSIGN_OR_RETURN(i, ParseDivisions(i));
      } else {
        REMAT_ASSIGN_OR_RETURN(const std::string value, ScalarValue(i));
        REMAT_RETURN_IF_ERROR(Apply(key, value));
        i += 2;
      }
      if (i + 1 < tokens_.size()) {
        if (tokens_[i + 1] != ",") {
          return Status::Invalid("allocator config: after " + key + ": expected ',' but found '" +
                                 tokens_[i + 1] + "' (accepted: key:value pairs separated by ',')");
        }
        ++i;
      }
    }
    return options_;
  }

 private:
  // The value token of the key at `i` ("key" ":" "value").
  Result<std::string> ScalarValue(size_t i) const {
    const std::string& key = tokens_[i];
    if (i + 1 >= tokens_.size() || tokens_[i + 1] != ":") {
      return Status::Invalid("allocator config: key '" + key +
                             "' has no ':value' (accepted: key:value pairs separated by ',')");
    }
    if (i + 2 >= tokens_.size() || IsSeparator(tokens_[i + 2])) {
      return Status::Invalid("allocator config: key '" + key + "' has no value after ':'");
    }
    return tokens_[i + 2];
  }

  Status Apply(const std::string& key, const std::string& value) {
    if (key == "large_segment_size_mb") return Status::Ok();  // read first
    if (key == "expandable_segments") return Bool(key, value, &options_.expandable_segments);
    if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
      const int64_t min_mb = options_.large_segment_bytes / kMiB;
      const auto mb = ParseCount(value);
      if (!mb || *mb < min_mb) {
        return Bad(key, value,
                   "accepted: an integer number of MiB >= " + std::to_string(min_mb) +
                       " (the large segment size)");
      }
      const int64_t bytes = std::min(*mb, kMaxMiB) * kMiB;
      (key == "max_split_size_mb" ? options_.max_split_size_bytes
                                  : options_.max_non_split_rounding_bytes) = bytes;
      return Status::Ok();
    }
    if (key == "garbage_collection_threshold") {
      const auto v = ParseNumber(value);
      if (!v || *v <= 0 || *v >= 1) return Bad(key, value, "accepted: a number in (0, 1)");
      options_.garbage_collection_threshold = *v;
      return Status::Ok();
    }
    if (key == "per_process_memory_fraction") {
      const auto v = ParseNumber(value);
      if (!v || *v <= 0 || *v > 1) return Bad(key, value, "accepted: a number in (0, 1]");
      options_.per_process_memory_fraction = *v;
      return Status::Ok();
    }
    if (key == "backend") {
      if (value == "native") return Status::Ok();
      if (value == "cudaMallocAsync") {
        return Bad(key, value, "the cudaMallocAsync allocator is not modelled (accepted: native)");
      }
      return Bad(key, value, "accepted: native");
    }
    if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc" ||
        key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register" ||
        key == "pinned_use_background_threads" || key == "graph_capture_record_stream_reuse") {
      bool ignored = false;
      REMAT_RETURN_IF_ERROR(Bool(key, value, &ignored));
      options_.ignored_keys.push_back(key);
      return Status::Ok();
    }
    if (key == "pinned_num_register_threads") {
      const auto n = ParseCount(value);
      if (!n || !IsPowerOf2(*n) || *n > 128) {
        return Bad(key, value, "accepted: a power of two <= 128");
      }
      options_.ignored_keys.push_back(key);
      return Status::Ok();
    }
    if (key == "pinned_reserve_segment_size_mb") {
      if (!ParseCount(value)) return Bad(key, value, "accepted: an integer number of MiB");
      options_.ignored_keys.push_back(key);
      return Status::Ok();
    }
    return Status::Invalid(
        "allocator config: unknown key '" + key +
        "' (accepted: expandable_segments, max_split_size_mb, max_non_split_rounding_mb, "
        "large_segment_size_mb, garbage_collection_threshold, roundup_power2_divisions, "
        "per_process_memory_fraction, backend, and the host-side keys PyTorch accepts)");
  }

  static Status Bool(const std::string& key, const std::string& value, bool* out) {
    if (value != "True" && value != "False") return Bad(key, value, "accepted: True or False");
    *out = value == "True";
    return Status::Ok();
  }

  // roundup_power2_divisions:N or roundup_power2_divisions:[mb:N,...,>:N];
  // returns the index of its last token.
  Result<size_t> ParseDivisions(size_t i) {
    const std::string key = tokens_[i];
    auto& divisions = options_.roundup_power2_divisions;
    if (i + 2 < tokens_.size() && tokens_[i + 1] == ":" && tokens_[i + 2] == "[") {
      i += 2;
      bool first = true;
      size_t last_index = 0;
      while (++i < tokens_.size() && tokens_[i] != "]") {
        const std::string boundary = tokens_[i];
        if (i + 2 >= tokens_.size() || tokens_[i + 1] != ":") {
          return Bad(key, "[..." + boundary + "...]",
                     "accepted: a list of <size_mb>:<divisions> ending with >:<divisions>");
        }
        const std::string value = tokens_[i + 2];
        i += 2;
        const auto n = ParseCount(value);
        if (!n || (*n != 0 && !IsPowerOf2(*n))) {
          return Bad(key, boundary + ":" + value, "accepted: divisions 0 (off) or a power of two");
        }
        if (boundary == ">") {
          for (size_t k = last_index + 1; k < divisions.size(); ++k) divisions[k] = *n;
        } else {
          const auto mb = ParseCount(boundary);
          if (!mb || !IsPowerOf2(*mb)) {
            return Bad(key, boundary + ":" + value,
                       "accepted: interval starts that are powers of two (in MiB), or '>'");
          }
          int log = 0;
          while ((int64_t{1} << (log + 1)) <= *mb) ++log;
          const size_t index = std::min<size_t>(static_cast<size_t>(log), divisions.size() - 1);
          if (first) {
            for (size_t k = 0; k < index; ++k) divisions[k] = *n;
            first = false;
          }
          divisions[index] = *n;
          last_index = index;
        }
        if (i + 1 < tokens_.size() && tokens_[i + 1] == ",") ++i;
      }
      if (i >= tokens_.size()) {
        return Status::Invalid("allocator config: " + key + ": the list has no closing ']'");
      }
      return i;
    }
    REMAT_ASSIGN_OR_RETURN(const std::string value, ScalarValue(i));
    const auto n = ParseCount(value);
    if (!n || !IsPowerOf2(*n)) {
      return Bad(key, value, "accepted: a power of two, or a list [<size_mb>:<divisions>,...]");
    }
    divisions.fill(*n);
    return i + 2;
  }

  std::vector<std::string> tokens_;
  AllocatorOptions options_;
};

}  // namespace

Result<AllocatorOptions> ParseAllocConf(std::string_view conf) { return ConfParser(conf).Parse(); }

}  // namespace remat
