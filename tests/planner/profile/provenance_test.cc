#include "remat/profile/provenance.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "remat/profile/profile.h"
#include "testing/chains.h"

namespace remat {
namespace {

Provenance CpuRun() {
  Provenance p;
  p.torch_version = "2.11.0";
  p.device_name = "Intel(R) Xeon(R) Processor";
  p.cpu_capability = "AVX512";
  p.intra_op_threads = 1;
  p.allocator = "cpu-meter";
  return p;
}

TEST(Provenance, ProfileRoundTripKeepsIt) {
  Profile p = testing::TransformerChain(3);
  p.provenance = CpuRun();
  p.provenance.compute_capability = "9.0";
  p.provenance.allocator_config = "expandable_segments:True";
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const Provenance& b = back->provenance;
  EXPECT_EQ(b.torch_version, "2.11.0");
  EXPECT_EQ(b.device_name, "Intel(R) Xeon(R) Processor");
  EXPECT_EQ(b.cpu_capability, "AVX512");
  EXPECT_EQ(b.compute_capability, "9.0");
  EXPECT_EQ(b.intra_op_threads, 1);
  EXPECT_EQ(b.allocator, "cpu-meter");
  EXPECT_EQ(b.allocator_config, "expandable_segments:True");
  EXPECT_EQ(ProfileToJson(*back), ProfileToJson(p));
}

TEST(Provenance, ProfilesWithoutItLoadAndWriteNone) {
  const Profile p = testing::TransformerChain(3);  // analytic-like: no provenance
  const std::string json = ProfileToJson(p);
  EXPECT_EQ(json.find("provenance"), std::string::npos);
  Result<Profile> back = ParseProfile(json, "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->provenance.present());
}

TEST(Provenance, JsonLeavesOutWhatIsNotKnown) {
  const nlohmann::ordered_json j = ProvenanceJson(CpuRun());
  EXPECT_EQ(j.dump(),
            R"({"torch_version":"2.11.0","device_name":"Intel(R) Xeon(R) Processor",)"
            R"("cpu_capability":"AVX512","intra_op_threads":1,"allocator":"cpu-meter"})");
}

TEST(Provenance, BadFieldsNameTheFileAndField) {
  nlohmann::json doc = nlohmann::json::parse(ProfileToJson(testing::TransformerChain(3)));
  doc["provenance"] = {{"torch_version", 2}};
  Result<Profile> bad = ParseProfile(doc.dump(), "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.json: provenance"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("torch_version"), std::string::npos);
  doc["provenance"] = {{"gpu", "h200"}};
  bad = ParseProfile(doc.dump(), "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpu"), std::string::npos) << bad.status().message();
  doc["provenance"] = "AVX512";
  EXPECT_FALSE(ParseProfile(doc.dump(), "p.json").ok());
}

TEST(Provenance, DescribesTheRunInOneLine) {
  EXPECT_EQ(DescribeProvenance(CpuRun()),
            "LibTorch 2.11.0; Intel(R) Xeon(R) Processor, CPU kernels AVX512; 1 intra-op thread; "
            "allocator cpu-meter");
  Provenance gpu;
  gpu.torch_version = "2.11.0";
  gpu.device_name = "NVIDIA H200";
  gpu.compute_capability = "9.0";
  gpu.cpu_capability = "AVX512";
  gpu.intra_op_threads = 8;
  gpu.allocator = "cuda-caching";
  gpu.allocator_config = "expandable_segments:True";
  EXPECT_EQ(DescribeProvenance(gpu),
            "LibTorch 2.11.0; NVIDIA H200, compute capability 9.0, CPU kernels AVX512; 8 "
            "intra-op threads; allocator cuda-caching (expandable_segments:True)");
  EXPECT_EQ(DescribeProvenance(Provenance{}), "");
}

}  // namespace
}  // namespace remat
