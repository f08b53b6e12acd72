// Profile JSON: ParsePlannerInput (kind detection) and ParseProfile, then a
// plan for the profile, its plan.json and the plan read back.
#include "fuzz_check.h"
#include "remat/input/input.h"
#include "remat/profile/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  const std::string source = "profile.json";
  const std::string_view text = fuzz::AsText(data, size);
  Result<PlannerInput> in = ParsePlannerInput(text, source);
  if (!in.ok()) fuzz::CheckRejection(in.status(), source);
  Result<Profile> p = ParseProfile(text, source);
  if (!p.ok()) {
    fuzz::CheckRejection(p.status(), source);
    return 0;
  }
  REMAT_FUZZ_CHECK(in.ok() && in->kind == PlannerInput::Kind::kProfile, std::string(text));
  // A budget between the model state and the peak without checkpointing
  // makes the strategies search; derive it from the profile.
  int64_t activations = 0;
  for (const LayerProfile& l : p->layers) activations += l.activation_bytes / 2;
  fuzz::CheckParsedProfile(*p, p->static_bytes() + activations);
  return 0;
}
