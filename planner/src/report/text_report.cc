// The terminal report of a planning result.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "remat/simulate/accumulation.h"
#include "remat/analytic/analytic.h"
#include "remat/report/report.h"
#include "remat/io/units.h"

namespace remat {
namespace {

std::string Percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string PadLeft(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// The device's terms beside the tensors (remat/device/device_memory.h), one named
// line each.
void DeviceTerms(std::ostringstream& o, const Plan& plan) {
  const DeviceMemoryUse& m = plan.memory;
  o << "  allocated peak   " << FormatBytes(m.allocated_peak_bytes)
    << " (tensors: torch.cuda.max_memory_allocated)\n";
  o << "  reserved peak    " << FormatBytes(m.reserved_peak_bytes) << " ("
    << DescribeReservedPeak(plan) << ")\n";
  if (m.replay_margin_bytes > 0) {
    o << "  replay margin    " << FormatBytes(m.replay_margin_bytes) << " ("
      << DescribeReplayMargin(plan) << ")\n";
  }
  o << "  fixed terms      " << FormatBytes(m.cuda_context_bytes + m.workspace_bytes)
    << " (cuda_context " << FormatBytes(m.cuda_context_bytes) << " + workspaces "
    << FormatBytes(m.workspace_bytes) << "; " << plan.terms.source << ")\n";
}

// One optimizer step over K > 1 micro-batches (remat/simulate/accumulation.h).
void UpdateLine(std::ostringstream& o, const Plan& plan, const Profile& p, int64_t k) {
  if (k <= 1) return;
  const UpdatePrediction u = PredictUpdate(p, plan.predicted, k);
  o << "  per update       " << k << " x " << FormatMillis(u.micro_step_ms) << " + " << k - 1
    << " x " << FormatMillis(u.accumulate_ms) << " adding gradients + "
    << FormatMillis(u.optimizer_step_ms) << " optimizer = " << FormatMillis(u.update_ms);
  if (u.tokens_per_s > 0) {
    o << ", " << FormatCount(static_cast<int64_t>(u.tokens_per_s)) << " tokens/s";
  }
  o << "\n";
}

// Which checkpoints go to host memory, over what, and what it costs.
void Offload(std::ostringstream& o, const Plan& plan, const Profile& p) {
  const SimulationResult& r = plan.predicted;
  std::string layers;
  int count = 0;
  for (int i = 0; i < p.num_layers(); ++i) {
    if (plan.decisions[i] != LayerDecision::kOffload) continue;
    if (++count <= 4) layers += (layers.empty() ? "" : ", ") + p.layers[i].name;
  }
  if (count > 4) layers += ", ... (" + std::to_string(count) + " in all)";
  const HostLink& link = p.host_link;
  o << "  offloaded        the checkpoints of " << layers << " over " << link.name << " ("
    << link.gb_per_s << " GB/s, " << (link.overlapped ? "overlapped" : "in line") << ")\n";
  o << "  host memory      " << FormatBytes(r.host_peak_bytes) << " at peak";
  if (link.budget_bytes > 0) o << " of " << FormatBytes(link.budget_bytes) << " host budget";
  o << "; " << FormatBytes(r.offloaded_bytes) << " copied out\n";
  o << "  transfers        " << FormatMillis(r.transfer_ms) << " added to the step (link busy "
    << FormatMillis(r.link_busy_ms) << ")\n";
}

void Summary(std::ostringstream& o, const Plan& plan, const Profile& p) {
  const SimulationResult& r = plan.predicted;
  const double base = BaselineStepMs(p);
  const bool terms = plan.terms.any();
  const int64_t peak = plan.memory.total_bytes;
  o << (terms ? "  device peak      " : "  predicted peak   ") << FormatBytes(peak);
  if (plan.budget_bytes > 0) {
    o << " of " << FormatBytes(plan.budget_bytes) << " budget ("
      << Percent(static_cast<double>(peak), static_cast<double>(plan.budget_bytes)) << ")  "
      << (plan.fits ? "FITS" : "DOES NOT FIT");
  }
  o << "\n";
  if (terms) DeviceTerms(o, plan);
  o << "  activations      " << FormatBytes(r.activation_peak_bytes) << " at peak ("
    << DescribeModelState(r.static_bytes, p) << ")\n";
  o << "  step time        " << FormatMillis(r.step_ms) << " (recompute "
    << FormatMillis(r.recompute_ms) << ", +" << Percent(std::max(0.0, r.step_ms - base), base)
    << " over no checkpointing)\n";
  if (r.offloaded_bytes > 0) Offload(o, plan, p);
  if (r.peak_op >= 0) {
    o << "  peak reached at  op " << r.peak_op << ": " << DescribeOp(plan.schedule.ops[r.peak_op]);
    const Op& op = plan.schedule.ops[r.peak_op];
    if (op.layer >= 0) o << " ('" << p.layers[op.layer].name << "')";
    o << "\n";
  }
}

// " (PyTorch's math kernel)": the backend an sdpa job's blocks run.
std::string SdpaKernel(const ModelConfig& c, const Profile& p) {
  if (c.attention != AttentionImpl::kSdpa) return "";
  for (const LayerProfile& l : p.layers) {
    if (!l.attention_backend.empty()) return " (PyTorch's " + l.attention_backend + " kernel)";
  }
  return "";
}

// Where the input came from, the model and the job, the budget.
void Header(std::ostringstream& o, const Plan& plan, const Profile& p, const ReportContext& ctx) {
  o << "remat plan for " << (p.model.empty() ? ctx.input_path : p.model) << "\n";
  o << "  input            " << ctx.input_path << " (" << ctx.input_kind << "; " << p.source
    << " profile" << (p.device.empty() ? "" : ", times for " + p.device) << ")\n";
  if (ctx.has_config) {
    const ModelConfig& c = ctx.config;
    o << "  model            " << ToString(c.architecture) << ", " << c.layers << " layers, hidden "
      << c.hidden << ", " << c.heads << " heads, ffn " << c.ffn_hidden << ", vocab " << c.vocab
      << "\n";
    o << "  job              seq_len " << c.seq_len
      << (ctx.default_seq_len ? " (the default: the config.json sets none; --seq-len N)" : "")
      << ", micro_batch " << c.micro_batch << ", "
      << ToString(c.precision) << ", " << ToString(c.optimizer) << ", " << ToString(c.attention)
      << " attention" << SdpaKernel(c, p) << ", dropout " << c.dropout;
    if (c.grad_accumulation > 1) o << ", grad_accumulation " << c.grad_accumulation;
    const int64_t chunks = WithDefaults(c).loss_chunks;
    if (chunks > 0) o << ", loss in " << chunks << " chunks";
    o << "\n";
  } else if (p.micro_batch > 0) {
    o << "  job              seq_len " << p.seq_len << ", micro_batch " << p.micro_batch;
    if (ctx.grad_accumulation > 1) o << ", grad_accumulation " << ctx.grad_accumulation;
    o << "\n";
  }
  if (p.parameters > 0) {
    o << "  parameters       " << FormatCount(p.parameters);
    const int64_t trained = TrainableParametersOf(ctx);
    if (trained >= 0 && trained != p.parameters) {
      o << " (" << FormatCount(trained) << " trainable, "
        << Percent(static_cast<double>(trained), static_cast<double>(p.parameters)) << ")";
    }
    o << "\n";
  }
  if (ctx.has_config && ctx.config.lora_rank > 0) {
    const ModelConfig& c = ctx.config;
    o << "  lora             rank " << c.lora_rank << " on "
      << LoraTargetsToString(WithDefaults(c).lora_targets) << ", alpha " << c.lora_alpha
      << ", dropout " << c.lora_dropout;
    if (c.quantization != Quantization::kNone) {
      o << "; base weights " << ToString(c.quantization)
        << (c.double_quant ? " (double-quantized)" : "");
    }
    o << "\n";
  }
  if (plan.budget_bytes > 0) {
    o << "  budget           " << FormatCount(plan.budget_bytes) << " bytes ("
      << FormatBytes(plan.budget_bytes) << ")\n";
  } else {
    o << "  budget           none given (use --budget, e.g. --budget 24GB)\n";
  }
  if (plan.terms.any()) {
    o << "  device terms     " << plan.terms.source << ": cuda_context "
      << FormatBytes(plan.terms.cuda_context_bytes) << ", workspaces "
      << FormatBytes(plan.terms.workspace_bytes);
    const std::string allocator = DescribeAllocatorModel(plan.terms);
    if (!allocator.empty()) o << ", " << allocator;
    if (plan.budget_bytes > 0) {
      o << "; " << FormatBytes(TensorBudget(plan.budget_bytes, plan.terms)) << " left for tensors";
    }
    o << "\n";
  }
  o << "\n";
}

void Baseline(std::ostringstream& o, const PlanSet& plans, const Profile& p) {
  const SimulationResult& b = plans.baseline.predicted;
  o << "Without checkpointing: peak " << FormatBytes(plans.baseline.memory.total_bytes)
    << " (" << DescribeModelState(b.static_bytes, p) << " + activations "
    << FormatBytes(b.activation_peak_bytes);
  if (plans.baseline.terms.any()) {
    o << " + device terms " << FormatBytes(plans.baseline.memory.total_bytes - b.peak_bytes);
  }
  o << "), step " << FormatMillis(b.step_ms);
  if (plans.chosen.budget_bytes > 0) o << (plans.baseline.fits ? ", fits" : ", does not fit");
  o << "\n\n";
}

void ChosenPlan(std::ostringstream& o, const PlanSet& plans, const Profile& p, int64_t k) {
  const Plan& plan = plans.chosen;
  o << "Plan: " << ToString(plan.strategy);
  if (!plan.parameter.empty()) o << " (" << plan.parameter << ")";
  if (plans.auto_selected) {
    o << (plan.fits ? ", chosen by auto as the fastest plan that fits"
                    : ": nothing fits, this is the plan with the lowest peak");
  }
  o << "\n";
  Summary(o, plan, p);
  UpdateLine(o, plan, p, k);
  o << "\n";
}

void MemoryAtPeak(std::ostringstream& o, const SimulationResult& r, const Profile& p) {
  o << "Where the memory goes at the peak:\n";
  const StaticMemory& s = p.static_memory;
  auto row = [&](const std::string& name, int64_t bytes) {
    o << "  " << Pad(name, 20) << PadLeft(FormatBytes(bytes), 12) << "  "
      << PadLeft(Percent(static_cast<double>(bytes), static_cast<double>(r.peak_bytes)), 6) << "\n";
  };
  row("parameters", s.parameter_bytes);
  row("gradients", s.gradient_bytes);
  row("optimizer state", s.optimizer_bytes);
  // The step's buffers: an eager decoder's causal mask, rotary tables.
  if (s.buffer_bytes > 0) row("buffers", s.buffer_bytes);
  row("parameter grads", r.at_peak[MemoryCategory::kParameterGrads]);  // created in backward
  row("activations kept", r.at_peak[MemoryCategory::kActivations]);
  row("recomputed", r.at_peak[MemoryCategory::kRecomputed]);
  row("activation grads", r.at_peak[MemoryCategory::kGradients]);
  row("workspace", r.at_peak[MemoryCategory::kWorkspace]);
  o << "  " << Pad("total", 20) << PadLeft(FormatBytes(r.peak_bytes), 12) << "\n\n";
}

void LayerTable(std::ostringstream& o, const Plan& plan, const Profile& p) {
  o << "Layers (activation bytes kept from forward to backward; live at the peak):\n";
  o << "  " << PadLeft("#", 4) << "  " << Pad("layer", 14) << Pad("decision", 12)
    << PadLeft("activations", 12) << PadLeft("at peak", 12) << PadLeft("fwd", 10)
    << PadLeft("bwd", 10) << "\n";
  for (int i = 0; i < p.num_layers(); ++i) {
    const LayerProfile& l = p.layers[i];
    int64_t kept = l.activation_bytes;
    std::string decision = ToString(plan.decisions[i]);
    if (plan.decisions[i] == LayerDecision::kSelective && plan.selective_option[i] >= 0) {
      const SelectiveOption& option = l.selective[plan.selective_option[i]];
      kept = option.activation_bytes;
      // The attention core is "selective"; the other options say theirs.
      if (option.name == kMlpActivationOption) decision = "sel:mlp";
      if (option.name == kAttentionCoreMlpOption) decision = "sel:attn+mlp";
      if (option.name == kNormOutputOption) decision = "sel:norm";
      if (option.name == kAllSelectiveOption) decision = "sel:all";
      if (option.name == kDropoutMaskOption) decision = "sel:drop";
      if (option.name == kAllWithDropoutOption) decision = "sel:all4";
      if (option.name == kExpertsOption) decision = "sel:experts";
      if (option.name == kAttentionCoreExpertsOption) decision = "sel:attn+exp";
    }
    o << "  " << PadLeft(std::to_string(i), 4) << "  " << Pad(l.name, 14) << Pad(decision, 12)
      << PadLeft(FormatBytes(kept), 12)
      << PadLeft(FormatBytes(plan.predicted.layer_bytes_at_peak[i]), 12)
      << PadLeft(FormatMillis(l.forward_ms), 10) << PadLeft(FormatMillis(l.backward_ms), 10)
      << "\n";
  }
  o << "\n";
}

void StrategyTable(std::ostringstream& o, const PlanSet& plans) {
  if (plans.candidates.size() <= 1) return;
  o << "Strategies (best setting of each"
    << (plans.chosen.budget_bytes > 0 ? " under the budget" : "") << "):\n";
  // The setting column is as wide as its longest entry ("lowest peak, 561
  // recomputes, up to 32 per layer"), so the figures stay aligned.
  size_t setting_width = 18;
  for (const Plan& c : plans.candidates) {
    setting_width = std::max(setting_width, c.parameter.size() + 2);
  }
  o << "  " << Pad("strategy", 16) << Pad("setting", setting_width) << PadLeft("peak", 12)
    << PadLeft("step", 12) << PadLeft("recompute", 12) << "  fits\n";
  for (const Plan& c : plans.candidates) {
    o << "  " << Pad(ToString(c.strategy), 16)
      << Pad(c.parameter.empty() ? "-" : c.parameter, setting_width)
      << PadLeft(FormatBytes(c.memory.total_bytes), 12)
      << PadLeft(FormatMillis(c.predicted.step_ms), 12)
      << PadLeft(FormatMillis(c.predicted.recompute_ms), 12) << "  " << (c.fits ? "yes" : "no")
      << "\n";
  }
  o << "\n";
}

}  // namespace

std::string DescribeReservedPeak(const Plan& plan) {
  const DeviceMemoryUse& m = plan.memory;
  std::ostringstream o;
  if (!m.replay) {
    o << "allocated + " << FormatBytes(m.allocator_rounding_bytes) << " allocator rounding + "
      << FormatBytes(m.fragmentation_bytes) << " fragmentation at "
      << Percent(plan.terms.fragmentation_fraction(), 1.0)
      << (plan.terms.fragmentation ? ", the user's fraction" : "");
    return o.str();
  }
  const AllocatorReplaySummary& r = *m.replay;
  o << "allocated + " << FormatBytes(m.allocator_rounding_bytes)
    << " held by the caching allocator, replayed over " << r.micro_steps << " micro-step"
    << (r.micro_steps == 1 ? "" : "s");
  if (r.out_of_memory) {
    o << "; out of memory at the budget";
  } else if (r.steady) {
    o << " to a steady state";
  } else {
    o << ", not yet steady";
  }
  if (r.under_budget_limit) {
    o << "; at the budget's limit the allocator frees its cache and retries (" << r.alloc_retries
      << " time" << (r.alloc_retries == 1 ? "" : "s") << ")";
  }
  return o.str();
}

std::string DescribeModelState(int64_t static_bytes, const Profile& profile) {
  const int64_t buffers = profile.static_memory.buffer_bytes;
  if (buffers <= 0) return "model state " + FormatBytes(static_bytes);
  return "model state " + FormatBytes(static_bytes - buffers) + " + buffers " +
         FormatBytes(buffers);
}

std::string DescribeReplayMargin(const Plan& plan) {
  const DeviceMemoryUse& m = plan.memory;
  if (m.replay_margin_bytes <= 0 || m.reserved_peak_bytes <= 0) return "";
  return Percent(static_cast<double>(m.replay_margin_bytes),
                 static_cast<double>(m.reserved_peak_bytes)) +
         " of the reserved peak: the tensor replay's largest shortfall on measured H200 runs "
         "(docs/device-memory.md)";
}

std::string DescribeAllocatorModel(const DeviceMemoryTerms& terms) {
  if (!terms.caching_allocator) return "";
  if (!terms.replays_allocator()) {
    return "caching allocator rounding + the user's fragmentation " +
           Percent(terms.fragmentation_fraction(), 1.0);
  }
  return "caching allocator replayed (" +
         (terms.alloc_conf_text.empty() ? std::string("PyTorch's defaults")
                                        : terms.alloc_conf_text) +
         ")";
}

std::string FormatPlanText(const PlanSet& plans, const Profile& p, const ReportContext& ctx) {
  std::ostringstream o;
  Header(o, plans.chosen, p, ctx);
  Baseline(o, plans, p);
  ChosenPlan(o, plans, p, ctx.grad_accumulation);
  MemoryAtPeak(o, plans.chosen.predicted, p);
  o << FormatRanksText(ctx);
  LayerTable(o, plans.chosen, p);
  StrategyTable(o, plans);
  if (!ctx.note.empty()) o << ctx.note << "\n";
  return o.str();
}

}  // namespace remat
