#include "analytic/chain.h"
#include "analytic/transformer_graph.h"
#include "remat/analytic.h"
#include "remat/checked_math.h"

namespace remat {

BytesPerParameter ModelStatePerParameter(Precision precision, Optimizer optimizer) {
  // Pure 16-bit training keeps weights, gradients and (as torch.optim does)
  // the optimizer state in the parameter dtype. AMP keeps fp32 master weights,
  // fp32 gradients and fp32 state.
  const int w = (precision == Precision::kBf16 || precision == Precision::kFp16) ? 2 : 4;
  BytesPerParameter b;
  b.weights = w;
  b.gradients = w;
  switch (optimizer) {
    case Optimizer::kAdamW: b.optimizer = 2 * w; break;
    case Optimizer::kSgdMomentum: b.optimizer = w; break;
    case Optimizer::kSgd:
    case Optimizer::kNone: b.optimizer = 0; break;
  }
  return b;
}

int64_t ParameterCount(const ModelConfig& config) {
  Result<TransformerGraph> g = BuildTransformerGraph(config);
  return g.ok() ? g->parameters : -1;
}

Result<Profile> AnalyticProfile(const ModelConfig& config, const AnalyticOptions& options) {
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(config, config.name));
  DeviceSpec device = options.device;
  if (device.name.empty()) {
    REMAT_ASSIGN_OR_RETURN(device, LookupDevice("a100"));
  }
  REMAT_ASSIGN_OR_RETURN(TransformerGraph tg, BuildTransformerGraph(config));
  const bool fp32 = config.precision == Precision::kFp32;
  double tflops = fp32 ? device.tflops_fp32 : device.tflops_16bit;
  double efficiency = device.efficiency;
  if (options.tflops > 0) {
    tflops = options.tflops;
    efficiency = 1.0;
  }
  OpTimeModel time;
  time.flops_per_ms = tflops * 1e12 * efficiency / 1e3;
  time.bytes_per_ms = device.bandwidth_gbps * 1e9 * efficiency / 1e3;
  REMAT_ASSIGN_OR_RETURN(std::vector<LayerProfile> layers,
                         DeriveChain(tg.graph, time, tg.kinds));

  Profile p;
  p.model = config.name;
  p.source = "analytic";
  p.device = options.tflops > 0 ? "custom (" + std::to_string(options.tflops) + " TFLOP/s)"
                                : device.name;
  p.parameters = tg.parameters;
  p.micro_batch = config.micro_batch;
  p.seq_len = config.seq_len;
  const BytesPerParameter per = ModelStatePerParameter(config.precision, config.optimizer);
  const CheckedInt params(tg.parameters);
  const CheckedInt pw = params * per.weights, pg = params * per.gradients,
                   po = params * per.optimizer;
  if (!(pw + pg + po).ok()) {
    return Status::Invalid(config.name + ": model state bytes overflow 64-bit arithmetic");
  }
  p.static_memory = {pw.value(), pg.value(), po.value()};
  // The optimizer step reads weights, gradients and state and writes weights and state.
  const double touched = 2.0 * pw.value() + pg.value() + 2.0 * po.value();
  p.optimizer_ms = config.optimizer == Optimizer::kNone ? 0 : time.Millis(0, touched);
  p.layers = std::move(layers);
  REMAT_RETURN_IF_ERROR(ValidateProfile(p, config.name));
  return p;
}

}  // namespace remat
