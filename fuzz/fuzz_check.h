// Checks shared by the fuzz targets. A failed check aborts, which libFuzzer
// reports as a crash and saves the input that caused it.
#ifndef REMAT_FUZZ_FUZZ_CHECK_H_
#define REMAT_FUZZ_FUZZ_CHECK_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat::fuzz {

[[noreturn]] inline void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz check failed: %s\n%s\n", what, detail.c_str());
  std::abort();
}

#define REMAT_FUZZ_CHECK(cond, detail) \
  do {                                 \
    if (!(cond)) ::remat::fuzz::Fail(#cond, (detail)); \
  } while (0)

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A rejected input must come back as kInvalidInput with one line of text that
// starts with `source` (the file the user gave), so the CLI prints one clear
// "planner: error: <file>: ..." line. An empty `source` skips that part.
inline void CheckRejection(const Status& status, std::string_view source) {
  REMAT_FUZZ_CHECK(!status.ok(), "expected an error");
  REMAT_FUZZ_CHECK(status.code() == StatusCode::kInvalidInput, status.message());
  const std::string& m = status.message();
  REMAT_FUZZ_CHECK(!m.empty(), "empty error message");
  REMAT_FUZZ_CHECK(m.find('\n') == std::string::npos, m);
  // As a Status prints it: control characters in a name are escaped.
  const std::string escaped = Status::Invalid(std::string(source)).message();
  REMAT_FUZZ_CHECK(source.empty() || m.compare(0, escaped.size(), escaped) == 0, m);
}

// What the CLI does with a model that parsed (checks.cc): the JSON round
// trip, the analytic profile (small models) and a plan (tiny models).
void CheckParsedModel(const ModelConfig& config, const std::string& source);

// What the CLI does with a profile that parsed: the JSON round trip and, for
// short chains, a plan under `budget_bytes` written as plan.json and read back.
void CheckParsedProfile(const Profile& profile, int64_t budget_bytes);

// A fixed chain of `layers` "block" layers (even ones with a selective
// option): the profile the schedule target runs its schedules on.
Profile FuzzChain(int layers);

}  // namespace remat::fuzz

#endif  // REMAT_FUZZ_FUZZ_CHECK_H_
