// A model's analytic profile on the CPU (the CPU's dtypes) and what a layer
// keeps from forward to backward there, for the tests that compare one job
// field against the job without it.
#ifndef REMAT_TESTS_TESTING_CPU_KEPT_H_
#define REMAT_TESTS_TESTING_CPU_KEPT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"

namespace remat::testing {

// The analytic profile of `c` on the CPU; empty, with a test failure, where
// it fails.
inline Profile ProfileOnCpu(const ModelConfig& c) {
  AnalyticOptions o;
  o.device = *LookupDevice("cpu");
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

// Activation bytes of `layer` ("block0", "head", ...); -1 and a test
// failure where the profile fails or has no such layer.
inline int64_t KeptOnCpu(const ModelConfig& c, const std::string& layer) {
  const Profile p = ProfileOnCpu(c);
  for (const LayerProfile& l : p.layers) {
    if (l.name == layer) return l.activation_bytes;
  }
  ADD_FAILURE() << "no layer " << layer;
  return -1;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_CPU_KEPT_H_
