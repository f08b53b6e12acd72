// Gradient accumulation in the runtime: K micro-batches of b give the
// gradients of one batch of K*b (LayerNorm model, fp32, dropout 0), the
// optimizer steps once per update, and the measured peak of an update is the
// simulated micro-step's; clipping, the schedule, the loss scaler and
// autocast of the training loop (below).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "device.h"
#include "gpt_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

constexpr int64_t kMicroBatches = 3;
constexpr uint64_t kSeed = 11;

ModelConfig NoDropout(int64_t micro_batch) {
  ModelConfig c = testing::TinyGpt();
  c.dropout = 0;
  c.micro_batch = micro_batch;
  return c;
}

std::vector<at::Tensor> Grads(const GptModel& model) {
  std::vector<at::Tensor> g;
  for (const at::Tensor& p : model.parameters()) g.push_back(p.grad().clone());
  return g;
}

// Largest |a - b| relative to the largest |b| of each tensor.
double RelativeError(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const at::Tensor bi = b[i].to(at::kDouble);
    const double scale = std::max(bi.abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (a[i].to(at::kDouble) - bi).abs().max().item<double>() / scale);
  }
  return worst;
}

// How far an fp32 gradient of the tiny model may be from the exact one,
// relative to its tensor's largest element. Each gradient element is a sum
// computed in fp32, in an order the kernels choose (it differs between
// ISAs, and between one batch and K micro-batches added up): a sum of N
// terms is off by at most ~N u times the sum of their magnitudes (u = 2^-24,
// fp32's unit roundoff), which for these gradients is of the order of the
// largest element. N is the longest reduction of the backward (the
// ffn_hidden = 128 columns of fc2, longer than the 3 x 2 x 16 = 96 tokens a
// weight gradient sums over), and the chain's L = 8 layers compound it.
double Fp32GradientTolerance(const ModelConfig& c) {
  const double n = static_cast<double>(
      std::max({c.ffn_hidden, c.hidden, c.vocab, kMicroBatches * c.micro_batch * c.seq_len}));
  const double layers = static_cast<double>(c.layers * 2);
  return layers * n * 0x1p-24;
}

// The K micro-batches, and the same sequences as one batch (dim 1: sequences).
struct Batches {
  std::vector<at::Tensor> micro;
  at::Tensor whole;
};

Batches MakeBatches(const GptModel& model) {
  Batches b;
  for (int64_t k = 0; k < kMicroBatches; ++k) b.micro.push_back(model.MakeBatch(5, k));
  b.whole = at::cat(b.micro, 1);
  return b;
}

// Runs the micro-batches with the executor; `scale_loss` false is a test
// double of a loop that forgets to divide the loss by K.
std::vector<at::Tensor> Accumulated(bool scale_loss) {
  const ModelConfig c = NoDropout(2);
  GptModel model(c, at::Device(at::kCPU), 11);
  model.AllocateGradients();
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
  ScheduleExecutor executor(model, nullptr, CpuMeter(), 11);
  Batches batches = MakeBatches(model);
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    Result<StepResult> r = scale_loss ? executor.RunStep(s, batches.micro[k], k, k, kMicroBatches)
                                      : executor.RunStep(s, batches.micro[k], k);
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
  return Grads(model);
}

// `dtype` kDouble: the same weights and batch in float64, the reference the
// fp32 runs are compared with (its own rounding is ~1e-16, none of the
// test's). It runs attention through scaled_dot_product_attention's causal
// path, the same function as the eager one's fp32 mask buffer.
std::vector<at::Tensor> OneBigBatch(at::ScalarType dtype = at::kFloat) {
  const ModelConfig small = NoDropout(2);
  GptModel micro_model(small, at::Device(at::kCPU), 11);
  const Batches batches = MakeBatches(micro_model);
  ModelConfig c = NoDropout(2 * kMicroBatches);
  if (dtype != at::kFloat) c.attention = AttentionImpl::kSdpa;
  GptModel model(c, at::Device(at::kCPU), 11);  // same seed: the same weights
  for (const at::Tensor& p : model.parameters()) {
    at::Tensor(p).set_data(p.detach().to(dtype));
  }
  model.AllocateGradients();
  ScheduleExecutor executor(model, nullptr, CpuMeter(), 11);
  Result<StepResult> r = executor.RunStep(
      testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone), batches.whole, 0);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return Grads(model);
}

TEST(Accumulation, MicroBatchesGiveTheGradientsOfOneBatch) {
  // Both fp32 runs against the float64 one: each is within the fp32 bound
  // of the exact gradients, whatever order its kernels summed in.
  const std::vector<at::Tensor> exact = OneBigBatch(at::kDouble);
  ASSERT_EQ(exact[0].scalar_type(), at::kDouble);
  const double tolerance = Fp32GradientTolerance(NoDropout(2));
  EXPECT_LE(RelativeError(OneBigBatch(), exact), tolerance);
  EXPECT_LE(RelativeError(Accumulated(true), exact), tolerance);
}

TEST(Accumulation, ALoopThatForgetsOneOverKIsCaught) {
  const std::vector<at::Tensor> whole = OneBigBatch();
  // K times too large: the error is K - 1 = 2.
  EXPECT_GT(RelativeError(Accumulated(false), whole), 1.0);
}

TEST(Accumulation, TheOptimizerStepsOncePerUpdateAndFreesTheGradients) {
  const ModelConfig c = NoDropout(2);
  GptModel model(c, at::Device(at::kCPU), 11);
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters());
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 11);
  const at::Tensor before = model.parameters()[0].clone();
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 0), 0, 0, 2).ok());
  EXPECT_TRUE(at::equal(model.parameters()[0], before));  // no update yet
  // Micro-batch 1 created the gradients; micro-batch 2 adds into them.
  EXPECT_GT(model.parameters()[0].grad().abs().sum().item<double>(), 0);
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 1), 1, 1, 2).ok());
  EXPECT_FALSE(at::equal(model.parameters()[0], before));
  for (const at::Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(executor.RunStep(s, model.MakeBatch(5, 2), 2, 2, 2).status().code(),
            StatusCode::kInvalidInput);
}

// Trains `c` with K = 4 from a measured profile: the measured peak of an
// update is the simulated micro-step's, to the byte.
void ExpectUpdatePeakIsSimulated(ModelConfig c) {
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  MeasureOptions m;
  m.repeats = 1;
  Result<Profile> profile = runtime->Measure(c, m);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  // Micro-batches 2..4 start with the gradients micro-batch 1 created.
  profile->grad_accumulation = 4;
  for (Strategy strategy : {Strategy::kNone, Strategy::kSegment}) {
    const Schedule schedule = testing::PlannerSchedule(*profile, strategy);
    Result<SimulationResult> predicted = Simulate(*profile, schedule);
    ASSERT_TRUE(predicted.ok());
    c.grad_accumulation = 4;
    TrainOptions t;
    t.steps = 2;
    Result<TrainResult> r = runtime->Train(c, schedule, t);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // Exact: micro-batches 2..K add each weight gradient into the one
    // micro-batch 1 created, through transients the profile measures
    // (LayerProfile::accumulate_workspace_bytes).
    EXPECT_EQ(r->peak_bytes, predicted->peak_bytes)
        << ToString(c.precision) << " " << ToString(strategy);
    EXPECT_EQ(r->steps.size(), 2u);
    EXPECT_TRUE(std::isfinite(r->steps.back().loss));
  }
}

TEST(Accumulation, MeasuredPeakOfAnUpdateIsTheSimulatedMicroStep) {
  ExpectUpdatePeakIsSimulated(testing::TinyGpt());
}

// amp_bf16 (autocast around each layer), clipped and scheduled: the
// measured-profile cell.
TEST(Accumulation, AmpBf16MeasuredPeakOfAnUpdateIsTheSimulatedMicroStep) {
  ModelConfig c = testing::TinyGpt();
  c.precision = Precision::kAmpBf16;
  c.max_grad_norm = 1.0;
  c.lr_schedule = LrSchedule::kCosine;
  ExpectUpdatePeakIsSimulated(c);
}

// The training loop around the optimizer, once per update: clipping by the
// global gradient norm after the K-th micro-batch, the learning-rate
// schedule, the dynamic loss scaler (amp_fp16), and autocast (amp_bf16).
constexpr int64_t kMicroBatch = 2;

std::vector<at::Tensor> Clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) out.push_back(t.detach().clone());
  return out;
}

// The micro-batches of one update, drawn by a model of micro-batch b.
std::vector<at::Tensor> MicroBatches() {
  const GptModel model(NoDropout(kMicroBatch), at::Device(at::kCPU), kSeed);
  return MakeBatches(model).micro;
}

// A clipping norm that fires, for the update and for each micro-batch alone
// (the tests assert both).
constexpr double kMaxGradNorm = 0.05;

OptimizerSettings Clipped() {
  OptimizerSettings s;
  s.max_grad_norm = kMaxGradNorm;
  return s;
}

struct Update {
  std::vector<at::Tensor> parameters;
  double grad_norm = 0;
  bool clipped = false;
};

// One clipped AdamW update over K micro-batches of b, as the runtime runs it.
Update ClippedAccumulated() {
  const ModelConfig c = NoDropout(kMicroBatch);
  GptModel model(c, at::Device(at::kCPU), kSeed);
  model.AllocateGradients();
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters(), Clipped());
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), kSeed);
  const std::vector<at::Tensor> batches = MicroBatches();
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    Result<StepResult> r = executor.RunStep(s, batches[k], k, k, kMicroBatches);
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
  EXPECT_EQ(optimizer.updates(), 1);
  return {Clones(model.parameters()), optimizer.last_grad_norm(), optimizer.last_clipped()};
}

// The same update as one batch of K*b.
Update ClippedOneBigBatch() {
  const ModelConfig c = NoDropout(kMicroBatch * kMicroBatches);
  GptModel model(c, at::Device(at::kCPU), kSeed);  // same seed: the same weights
  model.AllocateGradients();
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters(), Clipped());
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), kSeed);
  Result<StepResult> r =
      executor.RunStep(testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone),
                       at::cat(MicroBatches(), 1), 0);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return {Clones(model.parameters()), optimizer.last_grad_norm(), optimizer.last_clipped()};
}

// Test doubles of wrong loops: each micro-batch's gradients clipped on their
// own (`per_micro_batch`), or the loss not divided by K (`forget_one_over_k`),
// then the update.
Update WrongLoop(bool per_micro_batch, bool forget_one_over_k) {
  const ModelConfig c = NoDropout(kMicroBatch);
  GptModel model(c, at::Device(at::kCPU), kSeed);
  model.AllocateGradients();
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
  ScheduleExecutor executor(model, nullptr, CpuMeter(), kSeed);
  const std::vector<at::Tensor> batches = MicroBatches();
  std::vector<at::Tensor> sum;
  for (const at::Tensor& p : model.parameters()) sum.push_back(at::zeros_like(p));
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    Result<StepResult> r = forget_one_over_k ? executor.RunStep(s, batches[k], k)
                                             : executor.RunStep(s, batches[k], k, k, kMicroBatches);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!per_micro_batch) continue;
    double squares = 0;
    for (const at::Tensor& p : model.parameters()) squares += p.grad().pow(2).sum().item<double>();
    const double coefficient = std::min(1.0, kMaxGradNorm / (std::sqrt(squares) + 1e-6));
    EXPECT_LT(coefficient, 1.0) << "micro-batch " << k << " alone does not clip";
    const std::vector<at::Tensor> params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      sum[i].add_(params[i].grad(), coefficient);
      params[i].mutable_grad().zero_();
    }
  }
  if (per_micro_batch) {
    const std::vector<at::Tensor> params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad().copy_(sum[i]);
  }
  // The per-micro-batch double has clipped already; the other clips once.
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters(),
                           per_micro_batch ? OptimizerSettings{} : Clipped());
  optimizer.Step();
  return {Clones(model.parameters()), optimizer.last_grad_norm(), optimizer.last_clipped()};
}

// AdamW's first update of one element, over lr: m / (sqrt(v) + eps) with
// m = g and v = g^2 after bias correction, g/(|g| + eps): about sign(g),
// and ill-conditioned where |g| is near eps or below the gradient's error.
at::Tensor FirstAdamWDirection(const at::Tensor& g) {
  return g / (g.abs() + OptimizerSettings{}.eps);
}

// The worst difference between the parameters of two fp32 runs of one clipped
// AdamW update, element by element: every gradient g the runs may have
// computed lies within `tolerance` x (its tensor's largest) of `exact`, the
// clipping coefficient between the two runs'; the first update direction is
// monotone in c g, so its extremes over that range bound the difference.
// Plus fp32's rounding of p (1 - lr wd) - lr d in each run.
std::vector<at::Tensor> ParameterBound(const std::vector<at::Tensor>& exact,
                                       const std::vector<at::Tensor>& parameters, double tolerance,
                                       double c_lo, double c_hi) {
  const OptimizerSettings s;
  std::vector<at::Tensor> bounds;
  for (size_t i = 0; i < exact.size(); ++i) {
    const at::Tensor g = exact[i];
    const double delta = tolerance * g.abs().max().item<double>();
    const at::Tensor lo = at::minimum((g - delta) * c_lo, (g - delta) * c_hi);
    const at::Tensor hi = at::maximum((g + delta) * c_lo, (g + delta) * c_hi);
    const at::Tensor rounding = 2 * 4 * 0x1p-24 * (parameters[i].to(at::kDouble).abs() + s.lr);
    bounds.push_back(s.lr * (FirstAdamWDirection(hi) - FirstAdamWDirection(lo)) + rounding);
  }
  return bounds;
}

// Elements of `run`'s parameters outside ParameterBound of `whole`'s, and
// how many elements the bound leaves loose (above 1% of lr: where |g| is
// within ~100 times the gradients' error bound). Both depend on the exact
// gradients and the bound only, not on the kernels' order of summation.
struct BoundCheck {
  int64_t outside = 0, loose = 0, elements = 0;
};

BoundCheck CheckAgainstOneBatch(const Update& run, const Update& whole) {
  const double tolerance = Fp32GradientTolerance(NoDropout(kMicroBatch));
  // The coefficient each run clipped with (torch's clip_grad_norm_).
  const auto coefficient = [](double norm) { return kMaxGradNorm / (norm + 1e-6); };
  const double c_lo = std::min(coefficient(run.grad_norm), coefficient(whole.grad_norm));
  const double c_hi = std::max(coefficient(run.grad_norm), coefficient(whole.grad_norm));
  const std::vector<at::Tensor> bounds =
      ParameterBound(OneBigBatch(at::kDouble), whole.parameters, tolerance, c_lo, c_hi);
  BoundCheck check;
  for (size_t i = 0; i < bounds.size(); ++i) {
    const at::Tensor difference =
        (run.parameters[i].to(at::kDouble) - whole.parameters[i].to(at::kDouble)).abs();
    check.outside += (difference > bounds[i]).sum().item<int64_t>();
    check.loose += (bounds[i] > 1e-2 * OptimizerSettings{}.lr).sum().item<int64_t>();
    check.elements += difference.numel();
  }
  return check;
}

TEST(TrainingLoop, MicroBatchesGiveTheParametersOfOneBatchAfterAClippedAdamWStep) {
  const Update whole = ClippedOneBigBatch(), micro = ClippedAccumulated();
  EXPECT_TRUE(whole.clipped);
  EXPECT_TRUE(micro.clipped);
  EXPECT_GT(whole.grad_norm, 2 * kMaxGradNorm);  // it really clips
  // Each norm within the gradients' fp32 bound of the exact one.
  const double tolerance = Fp32GradientTolerance(NoDropout(kMicroBatch));
  EXPECT_NEAR(micro.grad_norm, whole.grad_norm, 2 * tolerance * whole.grad_norm);
  // The two runs' parameters differ by what their gradients' fp32 error
  // makes of one AdamW step, element by element: next to nothing where |g|
  // is well above that error (the step is lr sign(g) there), up to 2 lr
  // where it is not (the sign itself is rounding).
  const BoundCheck check = CheckAgainstOneBatch(micro, whole);
  EXPECT_EQ(check.outside, 0);
  // The bound is tight for most elements (4.3% loose on this model), so a
  // wrong loop falls outside it (below).
  EXPECT_LT(check.loose, check.elements / 10) << check.loose << " of " << check.elements;
}

TEST(TrainingLoop, ALoopThatClipsEachMicroBatchIsCaught) {
  const Update whole = ClippedOneBigBatch(), wrong = WrongLoop(true, false);
  EXPECT_GT(RelativeError(wrong.parameters, whole.parameters), 1e-3);
  EXPECT_GT(CheckAgainstOneBatch(wrong, whole).outside, 0);
}

TEST(TrainingLoop, ALoopThatForgetsOneOverKIsCaughtByTheNormItClips) {
  // Clipped to the same norm, a K-times gradient moves AdamW the same way;
  // the norm the loop clipped from (the one users log) is K times too large.
  const Update whole = ClippedOneBigBatch(), wrong = WrongLoop(false, true);
  EXPECT_NEAR(wrong.grad_norm / whole.grad_norm, static_cast<double>(kMicroBatches), 1e-3);
}

TEST(TrainingLoop, ClippingKeepsNoGradientSizedTemporaries) {
  ModelConfig c = NoDropout(kMicroBatch);
  c.vocab = 4096;  // a 512 KiB embedding gradient
  GptModel model(c, at::Device(at::kCPU), kSeed);
  model.AllocateGradients();
  for (const at::Tensor& p : model.parameters()) p.mutable_grad().fill_(1.0);
  ModelOptimizer optimizer(Optimizer::kSgd, model.parameters(), Clipped());
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.current_bytes();
  meter.ResetPeak();
  optimizer.Step();
  EXPECT_TRUE(optimizer.last_clipped());
  // One scalar per parameter tensor and their stack: bytes, not a copy of
  // the gradients.
  int64_t largest = 0;
  for (const at::Tensor& p : model.parameters()) {
    largest = std::max(largest, static_cast<int64_t>(p.nbytes()));
  }
  ASSERT_GE(largest, 512 * 1024);
  EXPECT_LT(meter.peak_bytes() - before, largest / 8);
}

TEST(TrainingLoop, LrFactorsFollowTransformersSchedules) {
  // get_linear_schedule_with_warmup(warmup 2, total 5).
  const double linear[] = {0, 0.5, 1, 2.0 / 3, 1.0 / 3};
  for (int t = 0; t < 5; ++t) EXPECT_DOUBLE_EQ(LrFactor(LrSchedule::kLinear, 2, 5, t), linear[t]);
  EXPECT_DOUBLE_EQ(LrFactor(LrSchedule::kCosine, 2, 6, 2), 1.0);
  EXPECT_NEAR(LrFactor(LrSchedule::kCosine, 2, 6, 4), 0.5, 1e-12);  // half way
  EXPECT_NEAR(LrFactor(LrSchedule::kCosine, 2, 6, 6), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(LrFactor(LrSchedule::kConstant, 4, 100, 1), 0.25);
  EXPECT_DOUBLE_EQ(LrFactor(LrSchedule::kConstant, 4, 100, 90), 1.0);
}

TEST(TrainingLoop, TheSchedulerAdvancesOncePerUpdateNotPerMicroBatch) {
  const ModelConfig c = NoDropout(kMicroBatch);
  GptModel model(c, at::Device(at::kCPU), kSeed);
  model.AllocateGradients();
  OptimizerSettings settings;
  settings.lr_schedule = LrSchedule::kLinear;
  settings.warmup_steps = 2;
  settings.total_updates = 5;
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters(), settings);
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), kSeed);
  std::vector<double> lrs;
  for (int64_t update = 0; update < 5; ++update) {
    lrs.push_back(optimizer.lr());
    for (int64_t k = 0; k < kMicroBatches; ++k) {
      const int64_t index = update * kMicroBatches + k;
      EXPECT_DOUBLE_EQ(optimizer.lr(), lrs.back()) << "update " << update << ", micro " << k;
      ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, index), index, k, kMicroBatches).ok());
    }
    EXPECT_EQ(optimizer.updates(), update + 1);
  }
  const double expected[] = {0, 0.5e-3, 1e-3, 2e-3 / 3, 1e-3 / 3};
  for (int t = 0; t < 5; ++t) EXPECT_NEAR(lrs[t], expected[t], 1e-15) << t;
}

TEST(TrainingLoop, TheLossScalerUnscalesAndSkipsNonFiniteUpdates) {
  // fp32 with the scaler: the loss is scaled by 65536 before backward and
  // the gradients unscaled before the step: the same parameters as without.
  auto train = [](bool scaler) {
    const ModelConfig c = NoDropout(kMicroBatch);
    GptModel model(c, at::Device(at::kCPU), kSeed);
    model.AllocateGradients();
    OptimizerSettings settings = Clipped();
    settings.loss_scaler = scaler;
    ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters(), settings);
    EXPECT_EQ(optimizer.loss_scale(), scaler ? 65536.0 : 1.0);
    const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
    ScheduleExecutor executor(model, &optimizer, CpuMeter(), kSeed);
    const std::vector<at::Tensor> batches = MicroBatches();
    for (int64_t k = 0; k < kMicroBatches; ++k) {
      EXPECT_TRUE(executor.RunStep(s, batches[k], k, k, kMicroBatches).ok());
    }
    return Update{Clones(model.parameters()), optimizer.last_grad_norm(), false};
  };
  const Update plain = train(false), scaled = train(true);
  EXPECT_NEAR(scaled.grad_norm, plain.grad_norm, 1e-5 * plain.grad_norm);
  EXPECT_LE(RelativeError(scaled.parameters, plain.parameters), 1e-5);

  // An inf gradient: no update, the scale halves, the schedule waits.
  GptModel model(NoDropout(kMicroBatch), at::Device(at::kCPU), kSeed);
  model.AllocateGradients();
  OptimizerSettings settings;
  settings.loss_scaler = true;
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters(), settings);
  const std::vector<at::Tensor> before = Clones(model.parameters());
  model.parameters()[1].mutable_grad().fill_(std::numeric_limits<float>::infinity());
  optimizer.Step();
  EXPECT_TRUE(optimizer.last_skipped());
  EXPECT_EQ(optimizer.updates(), 0);
  EXPECT_EQ(optimizer.loss_scale(), 32768.0);
  EXPECT_EQ(RelativeError(Clones(model.parameters()), before), 0);
  // The skipped update's gradients are set to None, as after any step.
  EXPECT_FALSE(model.parameters()[1].grad().defined());
}

TEST(TrainingLoop, AutocastRunsMatmulsInBf16WithFp32WeightsAndGradients) {
  ModelConfig c = NoDropout(kMicroBatch);
  c.precision = Precision::kAmpBf16;
  ASSERT_TRUE(DeviceRuns(c, at::Device(at::kCPU)).ok());
  GptModel model(c, at::Device(at::kCPU), kSeed);
  model.AllocateGradients();
  for (const at::Tensor& p : model.parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kFloat);
    EXPECT_EQ(p.grad().scalar_type(), at::kFloat);
  }
  const at::Tensor x = at::randn({2, 4, 32});
  const at::Tensor w = at::randn({32, 32}).requires_grad_(true);
  {
    const AutocastScope scope(c, at::Device(at::kCPU));
    EXPECT_EQ(at::matmul(x, w).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(at::matmul(x, w).scalar_type(), at::kFloat);  // the scope ends with it
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

}  // namespace
}  // namespace remat::runtime
