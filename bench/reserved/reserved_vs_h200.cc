// The caching allocator's replayed reserved peak against the H200's
// measured ones (profiles/results/devices/h200.json "runs": remat's runtime
// training the budget sweep's plans, scripts/gpu_run.sh), for every
// committed cell. Each cell's plan is made again from the committed measured
// profile at the sweep's budget and strategy, fitting by its allocated peak
// (as the sweep planned), and its schedule replayed without a cap three
// ways:
//   measured    the measured profile: one request per layer's saved set and
//               per op workspace (it has per-layer sizes only);
//   per layer   the analytic profile of the same model.json, same schedule,
//               with its tensor lists dropped (one request per figure);
//   per tensor  the analytic profile as the planner replays it: each saved
//               tensor, workspace tensor and parameter gradient its own
//               allocation (LayerTensors).
// The analytic replays add the measured cuBLAS workspaces (the runtime
// allocates them through the caching allocator; the measured profile holds
// them in its static memory). Prints one row per cell and the ratios
// replayed / measured, then the measured allocated peak and the analytic
// replay's against it (what of the reserved error is the allocated one).
// Ends with the largest shortfall of the per-tensor replay against the
// measured reserved peaks, and exits 1 when the planner's margin for such
// replays (kTensorReplayMargin, remat/device/device_memory.h) does not cover it:
// a plan made with the margin then fits every measured run. Usage, from
// the repository root (CTest runs it as reserved_margin_covers_h200):
//   build/bin/reserved_vs_h200
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/device/device_memory.h"
#include "remat/model/model_config.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/strategies/strategies.h"
#include "remat/io/units.h"

namespace {

using namespace remat;

// A model of the sweep: its committed measured profile and its model.json.
struct SweepModel {
  const char* profile;
  const char* model;
};
const SweepModel kGpt2 = {"profiles/fixtures/h200-gpt2.measured.json",
                          "bench/fidelity/models/h200-gpt2.json"};
const SweepModel kGpt2Medium = {"profiles/fixtures/h200-gpt2-medium.measured.json",
                                "bench/fidelity/models/h200-gpt2-medium.json"};

struct Cell {
  const char* run;  // the run's name in h200.json
  const SweepModel* job;
  Strategy strategy;
  int every;           // uniform's k
  const char* budget;  // the sweep's budget, as the report prints it
};

const Cell kCells[] = {
    {"h200-gpt2-none", &kGpt2, Strategy::kNone, 0, ""},
    {"h200-gpt2-b45", &kGpt2, Strategy::kUniform, 3, ""},
    {"h200-gpt2-b60", &kGpt2, Strategy::kOptimalSingle, 0, "6.64GiB"},
    {"h200-gpt2-b80", &kGpt2, Strategy::kOptimalSingle, 0, "8.85GiB"},
    {"h200-gpt2-medium-none", &kGpt2Medium, Strategy::kNone, 0, ""},
    {"h200-gpt2-medium-b45", &kGpt2Medium, Strategy::kOptimalSingle, 0, "11.57GiB"},
    {"h200-gpt2-medium-b60", &kGpt2Medium, Strategy::kOptimalSingle, 0, "15.42GiB"},
    {"h200-gpt2-medium-b80", &kGpt2Medium, Strategy::kOptimalSingle, 0, "20.57GiB"},
};

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Invalid(path + ": cannot read it (run from the repository root)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Profile WithoutTensorLists(Profile p) {
  for (LayerProfile& l : p.layers) {
    l.tensors = LayerTensors{};
    for (SelectiveOption& o : l.selective) {
      o.saved_tensors.clear();
      o.forward_workspace_tensors.clear();
    }
  }
  return p;
}

double GiB(int64_t b) { return static_cast<double>(b) / (1 << 30); }

Status Run() {
  REMAT_ASSIGN_OR_RETURN(const std::string device_text,
                         ReadFile("profiles/results/devices/h200.json"));
  const nlohmann::json device = nlohmann::json::parse(device_text);
  const int64_t workspaces = device.at("workspace_bytes").get<int64_t>();
  // --cuda-context 0 --cuda-workspace 0 --fragmentation 0: the sweep's
  // plans, which fit by their rounded allocated peak.
  DeviceMemoryTerms terms;
  terms.source = "flags";
  terms.caching_allocator = true;
  terms.fragmentation = 0.0;
  std::printf("%-22s %-30s %10s  %18s  %18s  %18s\n", "run", "plan", "measured", "measured profile",
              "analytic/layer", "analytic/tensor");
  double shortfall = 0;  // the largest measured / per-tensor replay - 1
  std::string worst;
  for (const Cell& c : kCells) {
    int64_t measured = 0, measured_allocated = 0;
    for (const auto& r : device.at("runs")) {
      if (r.at("run") != c.run) continue;
      measured = r.at("measured_reserved_bytes").get<int64_t>();
      measured_allocated = r.at("measured_allocated_bytes").get<int64_t>();
    }
    if (measured == 0) return Status::Invalid(std::string("h200.json has no run ") + c.run);
    REMAT_ASSIGN_OR_RETURN(const std::string profile_text, ReadFile(c.job->profile));
    REMAT_ASSIGN_OR_RETURN(const Profile fixture, ParseProfile(profile_text, c.job->profile));
    PlanOptions o;
    o.strategy = c.strategy;
    o.every = c.every;
    o.device_memory = terms;
    if (*c.budget != '\0') {
      REMAT_ASSIGN_OR_RETURN(o.budget_bytes, ParseBytes(c.budget));
    }
    REMAT_ASSIGN_OR_RETURN(const PlanSet set, MakePlan(fixture, o));
    const Plan& plan = set.chosen;
    REMAT_ASSIGN_OR_RETURN(const std::string model_text, ReadFile(c.job->model));
    REMAT_ASSIGN_OR_RETURN(const ModelConfig config, ParseModelConfig(model_text, c.job->model));
    AnalyticOptions ao;
    REMAT_ASSIGN_OR_RETURN(ao.device, LookupDevice("h200"));
    REMAT_ASSIGN_OR_RETURN(const Profile analytic, AnalyticProfile(config, ao));
    if (analytic.num_layers() != fixture.num_layers()) {
      return Status::Invalid(std::string(c.job->model) + ": its chain differs from " +
                             c.job->profile);
    }
    REMAT_ASSIGN_OR_RETURN(const TrainingStepReplay from_fixture,
                           ReplayTrainingSteps(fixture, plan.schedule, {}));
    REMAT_ASSIGN_OR_RETURN(const TrainingStepReplay per_layer,
                           ReplayTrainingSteps(WithoutTensorLists(analytic), plan.schedule, {}));
    REMAT_ASSIGN_OR_RETURN(const TrainingStepReplay per_tensor,
                           ReplayTrainingSteps(analytic, plan.schedule, {}));
    const int64_t replayed[] = {from_fixture.reserved_peak_bytes,
                                per_layer.reserved_peak_bytes + workspaces,
                                per_tensor.reserved_peak_bytes + workspaces};
    std::printf("%-22s %-30s %7.2f GiB", c.run,
                (std::string(ToString(plan.strategy)) + " " + plan.parameter).c_str(),
                GiB(measured));
    for (int64_t r : replayed) {
      std::printf("  %6.2f GiB %+6.1f%%", GiB(r),
                  100.0 * (static_cast<double>(r) / static_cast<double>(measured) - 1));
    }
    const double under = static_cast<double>(measured) / static_cast<double>(replayed[2]) - 1;
    if (under > shortfall) {
      shortfall = under;
      worst = c.run;
    }
    std::printf("   allocated %.2f GiB, analytic %+.1f%%\n", GiB(measured_allocated),
                100.0 * (static_cast<double>(per_tensor.allocated_peak_bytes + workspaces) /
                             static_cast<double>(measured_allocated) -
                         1));
  }
  const bool covered = shortfall <= kTensorReplayMargin;
  std::printf("largest shortfall of the per-tensor replay: %.2f%% (%s); the planner's margin %.1f%%"
              " %s\n",
              100 * shortfall, worst.empty() ? "none" : worst.c_str(), 100 * kTensorReplayMargin,
              covered ? "covers it" : "DOES NOT cover it");
  return covered ? Status::Ok() : Status::NoFit("the margin does not cover the measured runs");
}

}  // namespace

int main() {
  const remat::Status s = Run();
  if (s.code() == remat::StatusCode::kNoFit) return 1;
  if (!s.ok()) {
    std::fprintf(stderr, "reserved_vs_h200: %s\n", s.message().c_str());
    return 2;
  }
  return 0;
}
