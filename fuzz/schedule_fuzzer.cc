// Schedule JSON: ParseScheduleJson, ValidateSchedule and the simulator on a
// fixed chain. The first byte picks the chain length (1-8 layers); the rest
// is the schedule array.
#include "fuzz_check.h"
#include "remat/plan/plan.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remat;
  if (size == 0) return 0;
  const int layers = 1 + data[0] % 8;
  const Profile profile = fuzz::FuzzChain(layers);
  const std::string source = "schedule.json";
  Result<Schedule> s = ParseScheduleJson(fuzz::AsText(data + 1, size - 1), layers, source);
  if (!s.ok()) {
    fuzz::CheckRejection(s.status(), source);
    return 0;
  }
  REMAT_FUZZ_CHECK(s->num_layers == layers, "layer count");
  // Writing the schedule and reading it back gives the same ops.
  Result<Schedule> again = ParseScheduleJson(ScheduleToJson(*s), layers, source);
  REMAT_FUZZ_CHECK(again.ok() && ScheduleToJson(*again) == ScheduleToJson(*s), ScheduleToJson(*s));
  const Status valid = ValidateSchedule(*s, profile);
  Result<SimulationResult> r = Simulate(profile, *s);
  REMAT_FUZZ_CHECK(valid.ok() == r.ok(), valid.message());
  if (!valid.ok()) {
    fuzz::CheckRejection(valid, "");
    return 0;
  }
  REMAT_FUZZ_CHECK(r->peak_bytes >= profile.static_bytes(), ScheduleToJson(*s));
  REMAT_FUZZ_CHECK(r->timeline.size() == s->ops.size(), ScheduleToJson(*s));
  std::vector<LayerDecision> decisions;
  std::vector<int> options;
  SummarizeDecisions(*s, &decisions, &options);
  REMAT_FUZZ_CHECK(static_cast<int>(decisions.size()) == layers, ScheduleToJson(*s));
  for (const Op& op : s->ops) DescribeOp(op);
  return 0;
}
