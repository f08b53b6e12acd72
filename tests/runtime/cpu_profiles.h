// The two profiles the runtime tests compare layer by layer: a model
// measured by the runtime's CPU meter and derived by the analytic op model.
#ifndef REMAT_TESTS_RUNTIME_CPU_PROFILES_H_
#define REMAT_TESTS_RUNTIME_CPU_PROFILES_H_

#include <gtest/gtest.h>

#include <utility>

#include "memory_meter.h"
#include "profiler.h"
#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"

namespace remat::testing {

// `c` measured on the CPU (no warm-up, one repetition: bytes do not vary)
// into `measured`, and its analytic profile on --device cpu into
// `analytic`. Returns whether both were made with as many layers (a test
// failure where not).
inline bool MeasuredAndAnalyticOnCpu(const ModelConfig& c, Profile* measured, Profile* analytic) {
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 1;
  Result<Profile> m = runtime::MeasureProfile(c, o, runtime::Timing{}, runtime::CpuMeter());
  EXPECT_TRUE(m.ok()) << m.status().message();
  Result<DeviceSpec> device = LookupDevice("cpu");
  EXPECT_TRUE(device.ok());
  if (!m.ok() || !device.ok()) return false;
  AnalyticOptions cpu;
  cpu.device = *device;
  Result<Profile> a = AnalyticProfile(c, cpu);
  EXPECT_TRUE(a.ok()) << a.status().message();
  if (!a.ok()) return false;
  EXPECT_EQ(m->num_layers(), a->num_layers());
  if (m->num_layers() != a->num_layers()) return false;
  *measured = std::move(*m);
  *analytic = std::move(*a);
  return true;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_CPU_PROFILES_H_
