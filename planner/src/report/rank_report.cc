// A distributed job's ranks in the reports: what each rank's peak holds.
#include <sstream>

#include "remat/planning/planning.h"
#include "remat/report/report.h"
#include "remat/io/units.h"

namespace remat {

std::string DescribeParallelism(const Parallelism& p) {
  std::string data = ToString(p.data);
  switch (p.data) {
    case DataParallel::kDdp:
      data = "DDP";
      break;
    case DataParallel::kFsdp2:
      data = p.reshard_after_forward ? "FSDP2 full_shard" : "FSDP2 shard_grad_op";
      break;
    case DataParallel::kHsdp:
      data = "HSDP, sharded over " + std::to_string(p.shard_ranks());
      break;
    case DataParallel::kZero0:
    case DataParallel::kZero1:
    case DataParallel::kZero2:
    case DataParallel::kZero3:
      data = "ZeRO-" + std::string(ToString(p.data)).substr(4);
      break;
    case DataParallel::kNone:
      data = "no data parallelism";
      break;
  }
  std::string s = std::to_string(p.gpus) + " GPU" + (p.gpus == 1 ? "" : "s") + ": " +
                  std::to_string(p.data_ranks()) + " data rank" + (p.data_ranks() == 1 ? "" : "s") +
                  " (" + data + "), tensor " + std::to_string(p.tensor) +
                  (p.sequence ? " with sequence parallelism" : "") + ", pipeline " +
                  std::to_string(p.pipeline);
  if (p.pipeline > 1) {
    s += std::string(" (") + ToString(p.schedule);
    if (p.virtual_stages > 1) s += ", " + std::to_string(p.virtual_stages) + " virtual stages";
    s += ")";
  }
  return s;
}

std::vector<MemoryTerm> RankTermsAtPeak(const RankPlan& rank) {
  const RankModelState& s = rank.memory.state;
  const SimulationResult& r = rank.plans.chosen.predicted;
  const StaticMemory& st = rank.memory.profile.static_memory;
  // The persistent gradients (a shard, or Megatron's buffers) and those
  // backward had created by the peak.
  const int64_t persistent = st.gradient_bytes - s.ddp_bucket_bytes - s.reduce_bucket_bytes -
                             s.optimizer_gradient_bytes;
  const int64_t gradients = persistent + r.at_peak[MemoryCategory::kParameterGrads];
  // The buffers RankProfile adds live in one layer's pass (RankLayerBuffers):
  // those of the peak's op, where it is a layer's forward, recompute or
  // backward (micro-batches 2..K's where FSDP2 accumulates).
  const Plan& plan = rank.plans.chosen;
  RankLayerBuffers at;
  int64_t gather = 0;  // a recomputed block gathered again (a recompute follows it)
  if (r.peak_op >= 0 && r.peak_op < static_cast<int>(plan.schedule.ops.size())) {
    const Op& op = plan.schedule.ops[r.peak_op];
    const std::vector<RankLayerBuffers> buffers =
        RankLayerBuffersOf(*rank.memory.stage_profile, s);
    if (op.layer >= 0 && op.layer < static_cast<int>(buffers.size())) {
      const RankLayerBuffers& b = buffers[op.layer];
      if (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute) {
        at.prefetch_forward = b.prefetch_forward;
        for (size_t k = static_cast<size_t>(r.peak_op) + 1;
             op.kind == OpKind::kRecompute && k < plan.schedule.ops.size(); ++k) {
          const OpKind next = plan.schedule.ops[k].kind;
          if (next == OpKind::kRecompute) {
            gather = rank.memory.profile.layers[op.layer].recompute_gather_bytes;
          }
          if (next == OpKind::kRecompute || next == OpKind::kForward ||
              next == OpKind::kBackward || next == OpKind::kOptimizerStep) {
            break;
          }
        }
      } else if (op.kind == OpKind::kBackward) {
        at = b;
        at.prefetch_forward = 0;
      }
    }
  }
  std::vector<MemoryTerm> terms;
  int64_t sum = 0;
  for (MemoryTerm t : s.terms()) {
    if (t.name == "gradients") t.bytes = gradients;
    if (t.name == "fsdp_prefetch") t.bytes = at.prefetch_forward + at.prefetch_backward;
    if (t.name == "fsdp_gradients") {
      t.bytes = s.fsdp_accumulates ? at.gradients_later : at.gradients_first;
    }
    if (t.name == "reduce_scatter") t.bytes = at.reduce_scatter;
    if (t.name == "bucket_flush") t.bytes = at.bucket_flush;
    if (t.name == "recompute_gather") t.bytes = gather;
    sum += t.bytes;
    terms.push_back(t);
  }
  terms.push_back({"activations", r.peak_bytes - sum});
  return terms;
}

namespace {

std::string RankName(const RankPlan& r) {
  return "rank " + std::to_string(r.memory.rank) + " (stage " + std::to_string(r.memory.stage) +
         ", " + std::to_string(r.memory.ranks) + " rank" + (r.memory.ranks == 1 ? "" : "s") +
         " alike)";
}

std::string TermList(const RankPlan& r) {
  std::string s;
  for (const MemoryTerm& t : RankTermsAtPeak(r)) {
    s += (s.empty() ? "" : ", ") + t.name + " " + FormatBytes(t.bytes);
  }
  return s;
}

}  // namespace

std::string FormatRanksText(const ReportContext& ctx) {
  if (ctx.ranks == nullptr || ctx.ranks->empty()) return "";
  const std::vector<RankPlan>& ranks = *ctx.ranks;
  std::ostringstream o;
  o << "Ranks: " << DescribeParallelism(ctx.parallel) << "\n";
  o << "  worst            " << RankName(ranks[ctx.worst_rank]) << ": "
    << TermList(ranks[ctx.worst_rank]) << "\n";
  for (const RankPlan& r : ranks) {
    const Plan& p = r.plans.chosen;
    o << "  " << RankName(r) << ": peak " << FormatBytes(p.memory.total_bytes) << ", model state "
      << FormatBytes(p.predicted.static_bytes) << ", " << ToString(p.strategy)
      << (p.parameter.empty() ? "" : " (" + p.parameter + ")") << (p.fits ? "" : ", DOES NOT FIT");
    if (r.memory.state.host_bytes() > 0) {
      o << "; host " << FormatBytes(r.memory.state.host_bytes()) << " (";
      std::string terms;
      for (const MemoryTerm& t : r.memory.state.host_terms()) {
        terms += (terms.empty() ? "" : ", ") + t.name + " " + FormatBytes(t.bytes);
      }
      o << terms << "), " << FormatBytes(r.memory.state.host_copy_bytes)
        << " copied over the host link a step";
    }
    o << "\n";
  }
  o << "\n";
  return o.str();
}

std::string FormatRanksMarkdown(const ReportContext& ctx) {
  if (ctx.ranks == nullptr || ctx.ranks->empty()) return "";
  const std::vector<RankPlan>& ranks = *ctx.ranks;
  std::ostringstream o;
  o << "\n## Ranks\n\n"
    << DescribeParallelism(ctx.parallel) << ". The worst rank, " << RankName(ranks[ctx.worst_rank])
    << ", holds at its peak: " << TermList(ranks[ctx.worst_rank]) << ".\n\n";
  o << "| rank | ranks alike | stage | peak | model state | plan | fits |\n";
  o << "|---:|---:|---:|---:|---:|---|---|\n";
  for (const RankPlan& r : ranks) {
    const Plan& p = r.plans.chosen;
    o << "| " << r.memory.rank << " | " << r.memory.ranks << " | " << r.memory.stage << " | "
      << FormatBytes(p.memory.total_bytes) << " | " << FormatBytes(p.predicted.static_bytes)
      << " | " << ToString(p.strategy) << (p.parameter.empty() ? "" : " (" + p.parameter + ")")
      << " | " << (p.fits ? "yes" : "no") << " |\n";
  }
  return o.str();
}

}  // namespace remat
