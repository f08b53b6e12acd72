#include <map>
#include <set>

#include "analytic/chain.h"
#include "analytic/lora.h"
#include "analytic/optimizer_step.h"
#include "analytic/parts.h"
#include "analytic/transformer_graph.h"
#include "remat/analytic/analytic.h"
#include "remat/io/checked_math.h"
#include "remat/model/precision.h"

namespace remat {

using analytic::BuildTransformerGraph;
using analytic::DeriveChain;
using analytic::GraphModelState;
using analytic::KernelDevice;
using analytic::LoraWeightBytes;
using analytic::OpGraph;
using analytic::OpInfo;
using analytic::OpTimeModel;
using analytic::SdpaDeviceFor;
using analytic::TiedHead;
using analytic::TransformerGraph;

BytesPerParameter ModelStatePerParameter(Precision precision, Optimizer optimizer,
                                         GradDtype grad_dtype) {
  // Pure 16-bit training keeps weights, gradients and (as torch.optim does)
  // the optimizer state in the parameter dtype; AMP keeps all of it in fp32;
  // mixed_* keep 16-bit weights and an fp32 master copy with the moments.
  const PrecisionConvention& c = ConventionOf(precision);
  BytesPerParameter b;
  b.weights = c.weight_bytes;
  b.gradients = GradientBytes(precision, grad_dtype);
  int moments = 0;
  switch (optimizer) {
    case Optimizer::kAdamW:
      moments = 2;
      break;
    case Optimizer::kSgdMomentum:
    case Optimizer::kMuon:  // a matrix's; the vectors' under AdamW keep 2
      moments = 1;
      break;
    case Optimizer::kAdafactor:  // a matrix's rows and columns: counted by tensor
      break;
    case Optimizer::kAdamW8bit:  // two bytes, and an fp32 scale per 256 elements
    case Optimizer::kPagedAdamW8bit:
    case Optimizer::kTorchaoAdamW8bit:
    case Optimizer::kTorchaoAdamWFp8:
      b.optimizer = c.master_weight_bytes + 2;
      return b;
    case Optimizer::kTorchaoAdamW4bit:  // two 4-bit codes, an fp32 scale per 128
      b.optimizer = c.master_weight_bytes + 1;
      return b;
    case Optimizer::kSgd:
      break;
    case Optimizer::kNone:  // no update: no master weights either
      return b;
  }
  b.optimizer = c.master_weight_bytes + moments * c.moment_bytes;
  return b;
}

Result<StaticMemory> ModelStateBytes(int64_t parameters, int64_t trainable, Precision precision,
                                     Optimizer optimizer, GradDtype grad_dtype) {
  const BytesPerParameter per = ModelStatePerParameter(precision, optimizer, grad_dtype);
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

namespace {

// Trainable parameters per layer tag, each counted at the layer whose
// backward creates its gradient: a tied LM head's weight (owned by the
// embedding) at the head, whose backward runs first.
std::map<std::string, int64_t> GradientParameters(const OpGraph& g, const ModelConfig& config) {
  const ModelConfig c = WithDefaults(config);
  // Separate text passes share their weights: the last pass's backward runs
  // first and creates the gradients, the earlier passes' add into them.
  const int passes = TextPasses(c);
  const std::string first_backward = passes > 1 ? "p" + std::to_string(passes) + "." : "";
  std::map<std::string, int64_t> by_layer;
  for (const OpInfo& op : g.ops()) {
    if (op.layer.rfind(first_backward, 0) != 0 && op.layer != "loss") continue;
    if (op.trainable) by_layer[op.layer] += op.parameters;
  }
  // A tied weight's gradient is created by the head's backward, which runs
  // before the embedding's (unless it does not train: a LoRA job's base).
  if (TiedHead(c) && by_layer["embedding"] >= c.vocab * c.hidden) {
    by_layer["embedding"] -= c.vocab * c.hidden;
    by_layer["head"] += c.vocab * c.hidden;
  }
  return by_layer;
}

// The parameter gradient elements each layer's ops compute (layers that
// compute none are left out).
std::map<std::string, int64_t> ComputedGradients(const OpGraph& g) {
  std::map<std::string, int64_t> computed;
  for (const OpInfo& op : g.ops()) {
    if (op.gradient_elems > 0) computed[op.layer] += op.gradient_elems;
  }
  return computed;
}

// Whether a layer of `kind` may drop its input, as the runtime can
// (ChainModel::keeps_input): the loss, and a head whose output is not a view
// of its input (not CLS pooling's or classification's selected token).
bool ReleasableInput(const ModelConfig& c, const std::string& kind) {
  if (kind == kLossKind) return true;
  if (kind != kHeadKind) return false;
  if (c.head == Head::kPooling) return c.pooling == Pooling::kMean;
  return c.head != Head::kClassification;
}

// The parameters of each op that trains weights (its weight and bias
// together), by layer, in backward order: the parameter gradients the
// layer's backward creates, at so many bytes a parameter
// (LayerTensors::gradients; the replay checks the sum against the layer's
// gradient_bytes, which a tied weight moves).
std::map<std::string, std::vector<int64_t>> GradientParametersByOp(const OpGraph& g) {
  std::map<std::string, std::vector<int64_t>> out;
  for (auto it = g.ops().rbegin(); it != g.ops().rend(); ++it) {
    if (it->trainable && it->parameters > 0) out[it->layer].push_back(it->parameters);
  }
  return out;
}

// The layers whose backward creates every parameter gradient its ops compute
// (`created`: GradientParameters), so that each stays as .grad from its op on
// rather than being a transient added into an existing one: not a later
// pass's (the last pass created them), not an embedding whose tied weight's
// gradient its head created.
std::set<std::string> CreatingLayers(const OpGraph& g,
                                     const std::map<std::string, int64_t>& created) {
  const std::map<std::string, int64_t> computed = ComputedGradients(g);
  std::set<std::string> out;
  for (const auto& [layer, elems] : computed) {
    const auto it = created.find(layer);
    if (elems > 0 && it != created.end() && it->second == elems) out.insert(layer);
  }
  return out;
}

// Whether an op of `layer` or of the layer producing its input saves that
// input for backward (the chain's x between them).
bool KeepsInput(const OpGraph& g, const std::string& layer) {
  std::set<int> inputs;
  std::set<std::string> producers;
  for (const OpInfo& op : g.ops()) {
    if (op.layer != layer) continue;
    for (int t : op.inputs) {
      const int producer = g.tensors()[t].producer;
      if (producer >= 0 && g.ops()[producer].layer != layer) {
        inputs.insert(t);
        producers.insert(g.ops()[producer].layer);
      }
    }
  }
  for (const OpInfo& op : g.ops()) {
    if (op.layer != layer && producers.count(op.layer) == 0) continue;
    for (int t : op.saved) {
      if (inputs.count(t)) return true;
    }
  }
  return inputs.empty();
}

}  // namespace

struct AnalyticChain {
  TransformerGraph tg;
  OpTimeModel time;
  bool cpu = false;
  std::string device;  // the device's name
  // GradientParameters where the config creates its gradients in backward.
  std::map<std::string, int64_t> gradient_params;
  std::map<std::string, std::vector<int64_t>> gradient_ops;  // GradientParametersByOp
  std::vector<LayerProfile> layers;
};

Result<std::shared_ptr<const AnalyticChain>> BuildAnalyticChain(const ModelConfig& config,
                                                                const AnalyticOptions& options) {
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(config, config.name));
  DeviceSpec device = options.device;
  if (device.name.empty()) {
    REMAT_ASSIGN_OR_RETURN(device, LookupDevice("a100"));
  }
  KernelDevice kernels;
  kernels.cpu = device.name == "cpu";
  kernels.sdpa = SdpaDeviceFor(device.name);
  const analytic::TensorSplit split{options.parallel.tensor, options.parallel.sequence};
  auto chain = std::make_shared<AnalyticChain>();
  chain->cpu = kernels.cpu;
  chain->device = device.name;
  REMAT_ASSIGN_OR_RETURN(chain->tg, BuildTransformerGraph(config, kernels, split));
  const TransformerGraph& tg = chain->tg;
  const bool fp32 = ConventionOf(config.precision).activation_bytes == 4;
  double tflops = fp32 ? device.tflops_fp32 : device.tflops_16bit;
  double efficiency = device.efficiency;
  if (options.tflops > 0) {
    tflops = options.tflops;
    efficiency = 1.0;
  }
  OpTimeModel& time = chain->time;
  time.flops_per_ms = tflops * 1e12 * efficiency / 1e3;
  time.bytes_per_ms = device.bandwidth_gbps * 1e9 * efficiency / 1e3;
  time.random_per_ms = device.random_elements_per_s / 1e3;
  const bool created_in_backward = GradientsOf(config) == Gradients::kCreatedInBackward;
  if (created_in_backward) {
    chain->gradient_params = GradientParameters(tg.graph, config);
    chain->gradient_ops = GradientParametersByOp(tg.graph);
  }
  REMAT_ASSIGN_OR_RETURN(
      chain->layers,
      DeriveChain(tg.graph, time, tg.kinds, CreatingLayers(tg.graph, chain->gradient_params)));
  // A layer does not keep its input when no op of it or of its producer
  // saves it (cross_entropy's log_softmax keeps its output; mean pooling
  // keeps the mask; a frozen LM head keeps its weight): the input then dies
  // after the layer's forward. Asked of the loss and of the heads that
  // compute no parameter gradient and whose output is not a view of their
  // input (ReleasableInput): other layers' inputs may be held through views
  // (a selected token), and the runtime runs a layer that drops its input
  // on its producer's graph, which accumulates no parameter gradient.
  const std::map<std::string, int64_t> computed = ComputedGradients(tg.graph);
  for (LayerProfile& l : chain->layers) {
    if (ReleasableInput(config, l.kind) && computed.count(l.name) == 0) {
      l.keeps_input = KeepsInput(tg.graph, l.name);
    }
    const auto backend = tg.attention_backends.find(l.name);
    if (backend != tg.attention_backends.end()) l.attention_backend = backend->second;
  }
  return std::shared_ptr<const AnalyticChain>(std::move(chain));
}

const TransformerGraph& GraphOfChain(const AnalyticChain& chain) { return chain.tg; }

Result<Profile> AnalyticProfile(const ModelConfig& config, const AnalyticOptions& options) {
  REMAT_ASSIGN_OR_RETURN(std::shared_ptr<const AnalyticChain> chain,
                         BuildAnalyticChain(config, options));
  return AnalyticProfile(config, options, *chain);
}

Result<Profile> AnalyticProfile(const ModelConfig& config, const AnalyticOptions& options,
                                const AnalyticChain& chain) {
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(config, config.name));
  const TransformerGraph& tg = chain.tg;
  const OpTimeModel& time = chain.time;
  Profile p;
  p.model = config.name;
  p.source = "analytic";
  p.device =
      options.tflops > 0 ? "custom (" + std::to_string(options.tflops) + " TFLOP/s)" : chain.device;
  p.parameters = tg.parameters;
  p.micro_batch = config.micro_batch;  // examples (mnrl: texts_per_example texts each)
  p.seq_len = config.seq_len;
  Result<StaticMemory> state = GraphModelState(tg, WithDefaults(config));
  if (!state.ok()) return state.status().WithPrefix(config.name);
  p.static_memory = *state;
  p.static_memory.buffer_bytes = tg.buffer_bytes;
  // The optimizer step reads weights, gradients and state and writes weights
  // and state, of the trained parameters.
  const double trained_weights =
      static_cast<double>(tg.trainable_parameters) *
      (config.lora_rank > 0 ? LoraWeightBytes(config)
                            : ModelStatePerParameter(config.precision, config.optimizer).weights);
  const double touched = 2.0 * trained_weights + p.static_memory.gradient_bytes +
                         2.0 * p.static_memory.optimizer_bytes;
  // A loss scaler unscales the gradients (read, write) before the step.
  const double unscale = ConventionOf(config.precision).loss_scaler
                             ? 2.0 * static_cast<double>(p.static_memory.gradient_bytes)
                             : 0.0;
  // Clipping (max_grad_norm) reads the gradients for their norm, then
  // multiplies them in place: its transients are one scalar per tensor.
  const double clip =
      config.max_grad_norm > 0 ? 3.0 * static_cast<double>(p.static_memory.gradient_bytes) : 0.0;
  p.optimizer_ms = config.optimizer == Optimizer::kNone
                      ? 0
                      : time.Millis(analytic::OptimizerStepFlops(tg.trained_tensors, config),
                                    touched + unscale + clip);
  // Its temporaries: torch.optim's defaults, per parameter on the CPU,
  // foreach on a GPU.
  const analytic::StepWorkspace step =
      analytic::OptimizerStepWorkspace(tg.trained_tensors, WithDefaults(config), !chain.cpu);
  p.optimizer_workspace_bytes = step.bytes;
  p.optimizer_workspace_tensors = step.tensors;
  // Gradient accumulation adds each micro-batch's gradients into the kept
  // ones: read both, write the sum.
  p.accumulate_ms = time.Millis(0, 3.0 * static_cast<double>(p.static_memory.gradient_bytes));
  p.grad_accumulation = config.grad_accumulation;
  p.layers = chain.layers;
  if (GradientsOf(config) == Gradients::kCreatedInBackward) {
    // Each layer's backward creates its gradients; none is held in between.
    const std::map<std::string, int64_t>& params = chain.gradient_params;
    // Bytes per trained parameter: the model state's (a LoRA job's adapters
    // keep theirs in lora_dtype).
    const int64_t trained = tg.trainable_parameters;
    const int64_t per =
        trained > 0 && p.static_memory.gradient_bytes % trained == 0
            ? p.static_memory.gradient_bytes / trained
            : ModelStatePerParameter(config.precision, config.optimizer, config.grad_dtype)
                  .gradients;
    for (LayerProfile& l : p.layers) {
      const auto it = params.find(l.name);
      if (it != params.end()) l.gradient_bytes = it->second * per;
      l.tensors.gradients.clear();
      const auto ops = chain.gradient_ops.find(l.name);
      if (ops == chain.gradient_ops.end()) continue;
      for (int64_t parameters : ops->second) l.tensors.gradients.push_back(parameters * per);
    }
    p.static_memory.gradient_bytes = 0;
  }
  REMAT_RETURN_IF_ERROR(ValidateProfile(p, config.name));
  return p;
}

}  // namespace remat
