#include "remat/planning/engine_plan.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "remat/plan/best_plan.h"
#include "remat/plan/plan_memo.h"
#include "remat/strategies/fit_search.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

struct ShapeAt {
  EngineShape shape;
  int n;
};

constexpr Engine kEngines[] = {Engine::kPytorch, Engine::kHf, Engine::kDeepspeed, Engine::kMegatron,
                               Engine::kTorchtitan};

// The decisions of one pass's blocks.
std::vector<LayerDecision> BlockDecisions(const Profile& profile, const Plan& plan) {
  std::vector<LayerDecision> out;
  const std::vector<std::vector<int>> passes = BlockLayersPerPass(profile);
  if (passes.empty()) return out;
  for (int i : passes.front()) {
    out.push_back(i < static_cast<int>(plan.decisions.size()) ? plan.decisions[i]
                                                              : LayerDecision::kKeep);
  }
  return out;
}

bool HasAttentionCore(const Profile& profile) {
  for (int i : BlockLayers(profile)) {
    const std::vector<SelectiveOption>& s = profile.layers[i].selective;
    if (s.empty() || s.front().name != kAttentionCoreOption) return false;
  }
  return !BlockLayers(profile).empty();
}

// The shapes `engine` takes whose n the decisions of `plan` imply: the
// candidates for an exact expression.
// `in_line_link`: the profile has a host link whose copies run in line
// (transformers' offload copies on the compute stream: only such a plan is
// the one it runs).
std::vector<ShapeAt> ExactCandidates(Engine engine, const std::vector<LayerDecision>& blocks,
                                     bool attention_core, bool in_line_link) {
  std::vector<int> checkpointed;
  bool offloads = false;
  for (int i = 0; i < static_cast<int>(blocks.size()); ++i) {
    if (blocks[i] == LayerDecision::kCheckpoint) checkpointed.push_back(i);
    offloads = offloads || blocks[i] == LayerDecision::kOffload;
  }
  const int count = static_cast<int>(checkpointed.size());
  const int chunk =
      count >= 2 ? checkpointed[1] - checkpointed[0] : static_cast<int>(blocks.size());
  const int every_nth = count >= 1 ? checkpointed[0] + 1 : 0;
  // transformers' every_n_layers starts at block 0 (block 0 alone: n = the
  // block count).
  const int from_first = count == 0 || checkpointed[0] != 0 ? 0
                         : count >= 2                        ? checkpointed[1]
                                                             : static_cast<int>(blocks.size());
  std::vector<ShapeAt> out = {{EngineShape::kNone, 0}};
  switch (engine) {
    case Engine::kPytorch:
      return {{EngineShape::kAsPlanned, 0}};
    case Engine::kHf:
      out.push_back({EngineShape::kChunks, 1});
      if (from_first >= 2) out.push_back({EngineShape::kEveryNthFromFirst, from_first});
      if (offloads && in_line_link) out.push_back({EngineShape::kEveryBlockOffloaded, 1});
      break;
    case Engine::kDeepspeed:
      if (count >= 1) out.push_back({EngineShape::kChunks, chunk});
      break;
    case Engine::kMegatron:
      if (count >= 1) out.push_back({EngineShape::kChunks, chunk});
      if (count >= 1) out.push_back({EngineShape::kFirstBlocks, count});
      if (attention_core) out.push_back({EngineShape::kSelectiveAttention, 0});
      break;
    case Engine::kTorchtitan:
      out.push_back({EngineShape::kChunks, 1});
      if (every_nth >= 2) out.push_back({EngineShape::kEveryNth, every_nth});
      break;
  }
  return out;
}

// The shapes `engine` takes, each to be planned; the closest is the best.
// kChunks with n = 0: the best chunk length under the budget. `link`: the
// profile has a host link (hf's offload is weighed; a checkpoint can move
// only with two blocks or more).
std::vector<ShapeAt> ClosestCandidates(Engine engine, int blocks, bool attention_core, bool link) {
  std::vector<ShapeAt> out = {{EngineShape::kNone, 0}};
  switch (engine) {
    case Engine::kPytorch:
      break;
    case Engine::kHf:
      out.push_back({EngineShape::kChunks, 1});
      for (int n = 2; n <= blocks; ++n) out.push_back({EngineShape::kEveryNthFromFirst, n});
      if (link && blocks >= 2) out.push_back({EngineShape::kEveryBlockOffloaded, 1});
      break;
    case Engine::kDeepspeed:
      out.push_back({EngineShape::kChunks, 0});
      break;
    case Engine::kMegatron:
      out.push_back({EngineShape::kChunks, 0});
      if (attention_core) out.push_back({EngineShape::kSelectiveAttention, 0});
      break;
    case Engine::kTorchtitan:
      out.push_back({EngineShape::kChunks, 1});
      for (int n = 2; n <= blocks; ++n) out.push_back({EngineShape::kEveryNth, n});
      break;
  }
  return out;
}

// kEveryBlockOffloaded: remat's offload strategy at every 1 without a
// budget (every movable checkpoint offloaded) on `profile` with its link in
// line and no host budget (transformers offloads every block's input
// whatever the host holds), then accounted against the budget, the device
// memory terms and the host budget. Over an overlapped link the plan's
// setting says its copies run in line.
Result<Plan> PlanEveryBlockOffloaded(const Profile& profile, const PlanOptions& options) {
  Profile in_line = profile;
  in_line.host_link.overlapped = false;
  in_line.host_link.budget_bytes = 0;
  PlanOptions o;
  o.strategy = Strategy::kOffload;
  o.every = 1;
  REMAT_ASSIGN_OR_RETURN(PlanSet plans, MakePlan(in_line, o));
  Plan plan = std::move(plans.chosen);
  if (profile.host_link.overlapped) plan.parameter += ", copies in line";
  in_line.host_link.budget_bytes = profile.host_link.budget_bytes;
  REMAT_RETURN_IF_ERROR(
      AccountPlanMemory(in_line, options.device_memory, options.budget_bytes, &plan));
  return plan;
}

// `shape` at `n` planned with the budget and device memory of `options`:
// RunPlanner's plan for that strategy (MakePlan), without the fit advice
// RunPlanner adds when it does not fit (the note reports the fit). The
// job's profile must be valid (ValidShapeProfile). `*none_planned`: whether
// none's plan was made on this profile at the budget and device terms of
// `options` (set once it is).
Result<Plan> PlanShape(const Job& job, const PlanOptions& options, ShapeAt s, int blocks,
                       bool* none_planned) {
  PlanOptions o;
  o.budget_bytes = options.budget_bytes;
  o.device_memory = options.device_memory;
  switch (s.shape) {
    case EngineShape::kAsPlanned:
      return Status::Internal("PlanShape: kAsPlanned is the plan itself");
    case EngineShape::kNone:
      o.strategy = Strategy::kNone;
      break;
    case EngineShape::kChunks:
      o.strategy = Strategy::kUniform;
      o.every = s.n;
      break;
    case EngineShape::kFirstBlocks:
      o.strategy = Strategy::kManual;
      for (int i = 0; i < s.n; ++i) o.checkpoint_layers.push_back(i);
      break;
    case EngineShape::kEveryNth:
      o.strategy = Strategy::kManual;
      for (int i = s.n - 1; i < blocks; i += s.n) o.checkpoint_layers.push_back(i);
      break;
    case EngineShape::kEveryNthFromFirst:
      o.strategy = Strategy::kManual;
      for (int i = 0; i < blocks; i += s.n) o.checkpoint_layers.push_back(i);
      break;
    case EngineShape::kSelectiveAttention:
      o.strategy = Strategy::kSelective;
      for (int i = 0; i < blocks; ++i) o.selective_layers.push_back(i);
      break;
    case EngineShape::kEveryBlockOffloaded:
      return PlanEveryBlockOffloaded(job.profile, options);
  }
  // MakePlan(job.profile, o).chosen, the profile validated once by the
  // caller (ValidShapeProfile): none's plan (MakePlan fails where it
  // fails), then the strategy's, which its search makes alone (a shape's
  // strategy contains no other). None's plan reads of `o` the budget and
  // the device terms alone, so where it was made at them on this profile
  // (`*none_planned`) it is made again as it was, and not made.
  FitSearch search(job.profile, o);
  if (!*none_planned) {
    REMAT_RETURN_IF_ERROR(search.Of(Strategy::kNone).status());
    *none_planned = true;
  }
  return search.Of(o.strategy);
}

// What MakePlan checks of `profile` before it plans (ValidateProfile), for
// PlanShape's plans of it.
Status ValidShapeProfile(const Profile& profile) {
  return ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model);
}

// Whether `s`'s decisions follow from its n alone, whatever the budget and
// the device terms (a search's do not: uniform's every chosen under the
// budget, selective's blocks, hf's offloads).
bool FixedShape(ShapeAt s) {
  switch (s.shape) {
    case EngineShape::kNone:
    case EngineShape::kFirstBlocks:
    case EngineShape::kEveryNth:
    case EngineShape::kEveryNthFromFirst:
      return true;
    case EngineShape::kChunks:
      return s.n > 0;
    case EngineShape::kAsPlanned:
    case EngineShape::kSelectiveAttention:
    case EngineShape::kEveryBlockOffloaded:
      break;
  }
  return false;
}

// `options` without the budget and the device terms: a fixed shape's plan
// of the tensors alone, the same schedule and prediction, whose
// AccountPlanMemory with the terms and budget is the shape's plan with
// them (tests/planner/planning/engine_plan_test.cc).
PlanOptions TensorsOnly(const PlanOptions& options) {
  PlanOptions o = options;
  o.budget_bytes = 0;
  o.device_memory = DeviceMemoryTerms{};
  return o;
}

// The same per-layer decisions (and selective options where selective).
bool SameDecisions(const Plan& a, const Plan& b) {
  if (a.decisions != b.decisions) return false;
  for (size_t i = 0; i < a.decisions.size(); ++i) {
    if (a.decisions[i] != LayerDecision::kSelective) continue;
    auto option = [i](const Plan& p) {
      return i < p.selective_option.size() && p.selective_option[i] >= 0 ? p.selective_option[i]
                                                                         : 0;
    };
    if (option(a) != option(b)) return false;
  }
  return true;
}

// The n a planned kChunks shape chose (uniform's every) from its decisions.
int ChunkOf(const Profile& profile, const Plan& plan) {
  const std::vector<LayerDecision> blocks = BlockDecisions(profile, plan);
  std::vector<int> at;
  for (int i = 0; i < static_cast<int>(blocks.size()); ++i) {
    if (blocks[i] == LayerDecision::kCheckpoint) at.push_back(i);
  }
  if (at.size() >= 2) return at[1] - at[0];
  return static_cast<int>(blocks.size());
}

// `job` with its chunked loss set to `chunks` (0: the whole loss), its
// profile (and a distributed job's ranks) made again.
Result<Job> WithLossChunks(const Job& job, int64_t chunks) {
  Job changed = job.has_config() ? WithoutProfile(job) : job;
  changed.model.loss_chunks = chunks;
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(changed.model, job.path));
  return WithParallel(changed, job.parallel());
}

}  // namespace

int64_t EngineLossChunks(Engine engine, const Job& job) {
  if (!job.has_config()) return 0;
  const ModelConfig c = WithDefaults(job.config());
  if (c.loss_chunks <= 0) return 0;
  switch (engine) {
    case Engine::kPytorch:
      return c.loss_chunks;
    case Engine::kHf: {
      if (c.architecture != Architecture::kLlama) return 0;
      ModelConfig liger = c;
      liger.loss_chunks = kLossChunksAuto;
      return WithDefaults(liger).loss_chunks;
    }
    case Engine::kDeepspeed:
    case Engine::kMegatron:
    case Engine::kTorchtitan:
      break;
  }
  return 0;
}

const char* ToString(Engine e) {
  switch (e) {
    case Engine::kPytorch:
      return "pytorch";
    case Engine::kHf:
      return "hf";
    case Engine::kDeepspeed:
      return "deepspeed";
    case Engine::kMegatron:
      return "megatron";
    case Engine::kTorchtitan:
      return "torchtitan";
  }
  return "?";
}

Result<Engine> ParseEngine(std::string_view text) {
  std::string names;
  for (Engine e : kEngines) {
    if (text == ToString(e)) return e;
    names += std::string(names.empty() ? "" : ", ") + ToString(e);
  }
  return Status::Invalid("unknown engine '" + std::string(text) + "': expected one of " + names);
}

Result<EnginePlan> PlanForEngine(const Job& job, const PlanOptions& options, const Plan& plan,
                                 Engine engine) {
  EnginePlan out;
  out.engine = engine;
  out.asked_loss_chunks = job.has_config() ? WithDefaults(job.config()).loss_chunks : 0;
  out.loss_chunks = EngineLossChunks(engine, job);
  if (engine == Engine::kPytorch) {
    out.plan = plan;
    return out;
  }
  const Profile& profile = job.profile;
  const std::vector<LayerDecision> blocks = BlockDecisions(profile, plan);
  const int count = static_cast<int>(blocks.size());
  const bool attention_core = HasAttentionCore(profile);
  const bool link = profile.host_link.present();
  // The engine's shapes are planned on the job its configuration runs: the
  // job itself where it runs the job's chunked loss, else the job with the
  // loss the engine runs (whole, or Liger-Kernel's count).
  std::optional<Job> engine_job;
  if (out.loss_chunks != out.asked_loss_chunks) {
    REMAT_ASSIGN_OR_RETURN(engine_job, WithLossChunks(job, out.loss_chunks));
  }
  const Job& runs = engine_job ? *engine_job : job;
  // The shapes' searches (MakePlan) on one profile share its simulations:
  // each starts with the plan without checkpointing, and the closest
  // shapes' layer lists repeat across them.
  const PlanMemo memo(runs.profile);
  // A fixed shape's decisions are its tensors-only plan's. Whether none's
  // plan was made on a profile, tensors-only and with the device terms.
  bool none_planned[2][2] = {{false, false}, {false, false}};  // [runs is not job][fixed]
  if (!engine_job) REMAT_RETURN_IF_ERROR(ValidShapeProfile(job.profile));
  for (ShapeAt s : engine_job ? std::vector<ShapeAt>{}
                              : ExactCandidates(engine, blocks, attention_core,
                                                link && !profile.host_link.overlapped)) {
    if (s.shape != EngineShape::kNone && (s.n < 0 || s.n > count)) continue;
    REMAT_ASSIGN_OR_RETURN(Plan candidate,
                           PlanShape(job, FixedShape(s) ? TensorsOnly(options) : options, s,
                                     count, &none_planned[0][FixedShape(s)]));
    if (SameDecisions(candidate, plan)) {
      out.shape = s.shape;
      out.n = s.n;
      out.plan = plan;
      return out;
    }
  }
  out.exact = false;
  // The fixed shapes are accounted (the allocator replayed) only where that
  // can change the best (BestPlanIndex); the searches are planned in full.
  const DeviceMemoryTerms& terms = options.device_memory;
  const bool on_demand = terms.replays_allocator();
  REMAT_RETURN_IF_ERROR(ValidShapeProfile(runs.profile));
  std::vector<ShapeAt> shapes = ClosestCandidates(engine, count, attention_core, link);
  std::vector<PendingPlan> candidates;
  for (ShapeAt& s : shapes) {
    if (on_demand && FixedShape(s)) {
      REMAT_ASSIGN_OR_RETURN(Plan tensors, PlanShape(runs, TensorsOnly(options), s, count,
                                                     &none_planned[engine_job ? 1 : 0][1]));
      candidates.push_back(
          UnaccountedPlan(runs.profile, std::move(tensors), terms, options.budget_bytes));
      continue;
    }
    REMAT_ASSIGN_OR_RETURN(Plan candidate, PlanShape(runs, options, s, count,
                                                     &none_planned[engine_job ? 1 : 0][0]));
    if (s.shape == EngineShape::kChunks && s.n == 0) s.n = ChunkOf(runs.profile, candidate);
    candidates.push_back(AccountedPlan(std::move(candidate)));
  }
  const AccountPlan account = [&](Plan* p) {
    return AccountPlanMemory(runs.profile, terms, options.budget_bytes, p);
  };
  REMAT_ASSIGN_OR_RETURN(const size_t best, BestPlanIndex(&candidates, account));
  out.shape = shapes[best].shape;
  out.n = shapes[best].n;
  out.plan = std::move(candidates[best].plan);
  return out;
}

}  // namespace remat
