// What a report says about where its plan came from (ReportContext).
#include "remat/planning/planning.h"
#include "remat/report/report.h"

namespace remat {

ReportContext ReportContextOf(const Job& job) {
  ReportContext ctx;
  ctx.input_path = job.path;
  ctx.input_kind = ToString(job.kind);
  ctx.has_config = job.has_config();
  if (ctx.has_config) ctx.config = job.config();
  ctx.default_seq_len = job.default_seq_len;
  ctx.grad_accumulation = job.grad_accumulation();
  ctx.parallel = job.parallel();
  if (ctx.has_config) ctx.layout = job.layout;
  return ctx;
}

int64_t TrainableParametersOf(const ReportContext& ctx) {
  if (!ctx.has_config) return -1;
  return ctx.layout != nullptr ? TrainableParameters(*ctx.layout)
                               : TrainableParameterCount(ctx.config);
}

ReportContext ReportContextOf(const Job& job, const PlanningResult& result) {
  ReportContext ctx = ReportContextOf(result.planned(job));
  if (!result.ranks.empty()) {
    ctx.ranks = &result.ranks;
    ctx.worst_rank = result.worst_rank;
  }
  if (result.batch) ctx.batch = &*result.batch;
  if (result.advice) {
    ctx.note = "NO PLAN FITS: " + result.advice->message;
    ctx.advice = &*result.advice;
  }
  if (result.chunked_loss) ctx.note = result.chunked_loss->message;
  return ctx;
}

}  // namespace remat
