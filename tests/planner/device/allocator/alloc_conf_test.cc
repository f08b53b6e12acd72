// ParseAllocConf: PYTORCH_CUDA_ALLOC_CONF syntax. Expected values follow
// PyTorch's own AllocatorConfigTest (c10/test/core/AllocatorConfig_test.cpp).
#include <gtest/gtest.h>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// The interval index of a size in MiB: log2(mb) (1 MiB -> 0, 64 MiB -> 6).
int64_t DivisionsAt(const AllocatorOptions& o, int log2_mb) {
  return o.roundup_power2_divisions[static_cast<size_t>(log2_mb)];
}

TEST(AllocConf, EmptyIsPyTorchDefaults) {
  const auto o = ParseAllocConf("");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->expandable_segments);
  EXPECT_EQ(o->max_split_size_bytes, kAllocUnlimited);
  EXPECT_EQ(o->max_non_split_rounding_bytes, 20 * kMiB);
  EXPECT_EQ(o->large_segment_bytes, 20 * kMiB);
  EXPECT_EQ(o->garbage_collection_threshold, 0);
  for (int64_t d : o->roundup_power2_divisions) EXPECT_EQ(d, 0);
}

TEST(AllocConf, CommonSettings) {
  const auto o = ParseAllocConf(
      "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,"
      "roundup_power2_divisions:4");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->expandable_segments);
  EXPECT_EQ(o->max_split_size_bytes, 128 * kMiB);
  EXPECT_DOUBLE_EQ(o->garbage_collection_threshold, 0.6);
  for (int64_t d : o->roundup_power2_divisions) EXPECT_EQ(d, 4);
}

TEST(AllocConf, SpacesAndTrailingCommaAreAccepted) {
  const auto o = ParseAllocConf(" expandable_segments : True , ");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->expandable_segments);
}

// The first entry also covers the intervals below it; '>' covers those after
// the last entry; intervals between entries not named stay 0.
TEST(AllocConf, DivisionListAsPyTorch) {
  auto o = ParseAllocConf("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(DivisionsAt(*o, 5), 8);   // 32 MiB
  EXPECT_EQ(DivisionsAt(*o, 6), 8);   // 64 MiB
  EXPECT_EQ(DivisionsAt(*o, 7), 2);   // 128 MiB
  EXPECT_EQ(DivisionsAt(*o, 8), 4);   // 256 MiB
  EXPECT_EQ(DivisionsAt(*o, 9), 2);   // 512 MiB
  EXPECT_EQ(DivisionsAt(*o, 10), 4);  // 1024 MiB
  EXPECT_EQ(DivisionsAt(*o, 11), 1);  // 2048 MiB
  EXPECT_EQ(DivisionsAt(*o, 13), 1);  // 8192 MiB

  o = ParseAllocConf("roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(DivisionsAt(*o, 6), 8);
  EXPECT_EQ(DivisionsAt(*o, 8), 16);
  EXPECT_EQ(DivisionsAt(*o, 9), 1);
  EXPECT_EQ(DivisionsAt(*o, 10), 0);
  EXPECT_EQ(DivisionsAt(*o, 11), 8);
  EXPECT_EQ(DivisionsAt(*o, 12), 2);
}

TEST(AllocConf, LargeSegmentSizeIsReadFirstAndBoundsTheOthers) {
  auto o = ParseAllocConf("max_split_size_mb:30,large_segment_size_mb:25");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->large_segment_bytes, 25 * kMiB);
  EXPECT_EQ(o->max_non_split_rounding_bytes, 25 * kMiB);
  EXPECT_EQ(o->max_split_size_bytes, 30 * kMiB);
  // PyTorch: max_split_size_mb must be >= large_segment_size_mb.
  o = ParseAllocConf("max_split_size_mb:20,large_segment_size_mb:25");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find(">= 25"), std::string::npos) << o.status().message();
}

TEST(AllocConf, HostSideKeysAreIgnored) {
  const auto o = ParseAllocConf(
      "pinned_use_cuda_host_register:True,pinned_num_register_threads:8,backend:native,"
      "release_lock_on_cudamalloc:False");
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_EQ(o->ignored_keys.size(), 3u);
  EXPECT_EQ(o->ignored_keys[0], "pinned_use_cuda_host_register");
  EXPECT_EQ(o->ignored_keys[2], "release_lock_on_cudamalloc");
}

TEST(AllocConf, PerProcessMemoryFraction) {
  const auto o = ParseAllocConf("per_process_memory_fraction:0.5");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_DOUBLE_EQ(o->per_process_memory_fraction, 0.5);
  EXPECT_EQ(MemoryFractionCapBytes(0.5, 80 * kMiB), 40 * kMiB);
}

// Each error is one line naming the key and value and what is accepted.
TEST(AllocConf, ErrorsNameKeyValueAndWhatIsAccepted) {
  struct Case {
    const char* conf;
    const char* names;
    const char* accepted;
  };
  const Case cases[] = {
      {"max_split_size_mb:10", "max_split_size_mb:10", ">= 20"},
      {"max_split_size_mb:abc", "max_split_size_mb:abc", "integer"},
      {"expandable_segments:true", "expandable_segments:true", "True or False"},
      {"garbage_collection_threshold:1.5", "garbage_collection_threshold:1.5", "(0, 1)"},
      {"garbage_collection_threshold:0", "garbage_collection_threshold:0", "(0, 1)"},
      {"roundup_power2_divisions:3", "roundup_power2_divisions:3", "power of two"},
      {"roundup_power2_divisions:[100:2,>:4]", "100:2", "powers of two"},
      {"roundup_power2_divisions:[64:8", "roundup_power2_divisions", "']'"},
      {"backend:cudaMallocAsync", "backend:cudaMallocAsync", "accepted: native"},
      {"large_segment_size_mb:10", "large_segment_size_mb:10", "> 10"},
      {"foo:123", "'foo'", "accepted: expandable_segments"},
      {"expandable_segments", "expandable_segments", "no ':value'"},
      {"max_split_size_mb:", "max_split_size_mb", "no value"},
      {"expandable_segments:True:False", "expandable_segments", "expected ','"},
  };
  for (const Case& c : cases) {
    const auto o = ParseAllocConf(c.conf);
    ASSERT_FALSE(o.ok()) << c.conf;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidInput);
    const std::string& m = o.status().message();
    EXPECT_NE(m.find(c.names), std::string::npos) << c.conf << " -> " << m;
    EXPECT_NE(m.find(c.accepted), std::string::npos) << c.conf << " -> " << m;
  }
}

}  // namespace
}  // namespace remat
