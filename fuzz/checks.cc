// Follow-on checks for inputs that parsed: they run the code the CLI runs
// next, so the fuzzers reach the cost model, the strategies and the simulator.
#include "fuzz_check.h"
#include "remat/planner.h"

namespace remat::fuzz {

void CheckParsedModel(const ModelConfig& c, const std::string& source) {
  const std::string json = ModelConfigToJson(c);
  Result<ModelConfig> again = ParseModelConfig(json, source);
  REMAT_FUZZ_CHECK(again.ok(), again.status().message() + "\n" + json);
  REMAT_FUZZ_CHECK(ModelConfigToJson(*again) == json, json);
  if (c.layers > 8) return;  // keeps executions fast; sizes, not depth, overflow
  Result<Profile> p = AnalyticProfile(c, AnalyticOptions{});
  if (!p.ok()) {
    CheckRejection(p.status(), c.name);
    return;
  }
  REMAT_FUZZ_CHECK(ValidateProfile(*p, "analytic").ok(), json);
  REMAT_FUZZ_CHECK(p->parameters == ParameterCount(c), json);
  // embedding, blocks, (final_norm,) head per text pass, then the loss.
  const int extra = c.architecture == Architecture::kBert ? 3 : 4;
  REMAT_FUZZ_CHECK(p->num_layers() == TextPasses(c) * (c.layers + extra - 1) + 1, json);
  if (c.layers > 2) return;
  CheckParsedProfile(*p, p->static_bytes() + p->layers[0].input_bytes + 1);
}

void CheckParsedProfile(const Profile& p, int64_t budget_bytes) {
  const std::string json = ProfileToJson(p);
  Result<Profile> again = ParseProfile(json, "profile.json");
  REMAT_FUZZ_CHECK(again.ok(), again.status().message() + "\n" + json);
  REMAT_FUZZ_CHECK(ProfileToJson(*again) == json, json);
  if (p.num_layers() > 16) return;
  PlanOptions o;
  o.budget_bytes = budget_bytes;
  Result<PlanSet> plans = MakePlan(p, o);
  REMAT_FUZZ_CHECK(plans.ok(), plans.status().message() + "\n" + json);
  const Plan& chosen = plans->chosen;
  REMAT_FUZZ_CHECK(chosen.predicted.peak_bytes >= p.static_bytes(), json);
  REMAT_FUZZ_CHECK(chosen.fits == (budget_bytes <= 0 || chosen.predicted.peak_bytes <= budget_bytes),
                   json);
  // The plan file the CLI writes must read back (planner train --plan).
  ReportContext ctx;
  ctx.input_path = "profile.json";
  ctx.input_kind = "profile";
  const std::string plan_json = PlanToJson(*plans, p, ctx);
  Result<LoadedPlan> loaded = ParsePlanJson(plan_json, "plan.json");
  REMAT_FUZZ_CHECK(loaded.ok(), loaded.status().message() + "\n" + plan_json);
  REMAT_FUZZ_CHECK(loaded->schedule.ops.size() == chosen.schedule.ops.size(), plan_json);
  FormatPlanText(*plans, p, ctx);
}

Profile FuzzChain(int layers) {
  Profile p;
  p.model = "chain";
  p.static_memory.parameter_bytes = 1000;
  p.optimizer_ms = 1;
  for (int i = 0; i < layers; ++i) {
    LayerProfile l;
    l.name = "layer" + std::to_string(i);
    l.kind = kBlockKind;
    l.forward_ms = 1 + i;
    l.backward_ms = 2 + i;
    l.input_bytes = 100;
    l.output_bytes = 100;
    l.activation_bytes = 400 + 10 * i;
    l.forward_workspace_bytes = 50;
    l.backward_workspace_bytes = 70;
    if (i % 2 == 0) l.selective.push_back({kAttentionCoreOption, 200, 0.5, 30});
    p.layers.push_back(l);
  }
  return p;
}

}  // namespace remat::fuzz
