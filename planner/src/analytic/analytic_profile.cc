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
    case Optimizer::kAdamW:
      b.optimizer = 2 * w;
      break;
    case Optimizer::kSgdMomentum:
      b.optimizer = w;
      break;
    case Optimizer::kSgd:
    case Optimizer::kNone:
      b.optimizer = 0;
      break;
  }
  return b;
}

Result<StaticMemory> ModelStateBytes(int64_t parameters, int64_t trainable, Precision precision,
                                     Optimizer optimizer) {
  const BytesPerParameter per = ModelStatePerParameter(precision, optimizer);
  const CheckedInt all(parameters), trained(trainable);
  const CheckedInt pw = all * per.weights, pg = trained * per.gradients,
                   po = trained * per.optimizer;
  if (!(pw + pg + po).ok()) return Status::Invalid("model state bytes overflow 64-bit arithmetic");
  return StaticMemory{pw.value(), pg.value(), po.value()};
}

int64_t ParameterCount(const ModelConfig& config) {
  Result<TransformerGraph> g = BuildTransformerGraph(config);
  return g.ok() ? g->parameters : -1;
}

int64_t TrainableParameterCount(const ModelConfig& config) {
  Result<TransformerGraph> g = BuildTransformerGraph(config);
  return g.ok() ? g->trainable_parameters : -1;
}

Result<Profile> AnalyticProfile(const ModelConfig& config, const AnalyticOptions& options) {
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(config, config.name));
  DeviceSpec device = options.device;
  if (device.name.empty()) {
    REMAT_ASSIGN_OR_RETURN(device, LookupDevice("a100"));
  }
  KernelDevice kernels;
  kernels.cpu = device.name == "cpu";
  REMAT_ASSIGN_OR_RETURN(TransformerGraph tg, BuildTransformerGraph(config, kernels));
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
  REMAT_ASSIGN_OR_RETURN(std::vector<LayerProfile> layers, DeriveChain(tg.graph, time, tg.kinds));

  Profile p;
  p.model = config.name;
  p.source = "analytic";
  p.device =
      options.tflops > 0 ? "custom (" + std::to_string(options.tflops) + " TFLOP/s)" : device.name;
  p.parameters = tg.parameters;
  p.micro_batch = config.micro_batch;  // examples (mnrl: texts_per_example texts each)
  p.seq_len = config.seq_len;
  Result<StaticMemory> state =
      ModelStateBytes(tg.parameters, tg.trainable_parameters, config.precision, config.optimizer);
  if (!state.ok()) return state.status().WithPrefix(config.name);
  p.static_memory = *state;
  // The optimizer step reads weights, gradients and state and writes weights
  // and state, of the trained parameters.
  const double trained_weights = static_cast<double>(tg.trainable_parameters) *
                                 ModelStatePerParameter(config.precision, config.optimizer).weights;
  const double touched = 2.0 * trained_weights + p.static_memory.gradient_bytes +
                         2.0 * p.static_memory.optimizer_bytes;
  p.optimizer_ms = config.optimizer == Optimizer::kNone ? 0 : time.Millis(0, touched);
  p.layers = std::move(layers);
  REMAT_RETURN_IF_ERROR(ValidateProfile(p, config.name));
  return p;
}

}  // namespace remat
