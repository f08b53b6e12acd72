#include "job.h"

namespace remat::cli {

std::vector<FlagSpec> JobFlags() {
  return {
      {"device", "NAME", "device for analytic times: h200, a100 (default), rtx4090, cpu"},
      {"tflops", "X", "achieved TFLOP/s for analytic times (overrides --device peaks)"},
      {"micro-batch", "N", "override model.json micro_batch"},
      {"seq-len", "N", "override model.json seq_len"},
      {"precision", "P", "override precision: fp32, bf16, fp16, amp_bf16, amp_fp16"},
  };
}

Result<std::string> InputPath(const Args& args, const std::string& usage) {
  if (args.positional().empty()) return Status::Invalid("missing input file; usage: " + usage);
  if (args.positional().size() > 1) {
    return Status::Invalid("expected one input file, got " +
                           std::to_string(args.positional().size()) + " ('" +
                           args.positional()[0] + "', '" + args.positional()[1] +
                           "', ...); usage: " + usage);
  }
  return args.positional()[0];
}

Result<Job> LoadJob(const std::string& path, const Args& args) {
  Job job;
  REMAT_ASSIGN_OR_RETURN(job.input, LoadPlannerInput(path));
  job.context.input_path = path;
  REMAT_ASSIGN_OR_RETURN(job.analytic.device, LookupDevice(args.Get("device", "a100")));
  REMAT_ASSIGN_OR_RETURN(job.analytic.tflops, args.GetDouble("tflops", 0, 1e-6, 1e9));
  const bool overrides = args.Has("micro-batch") || args.Has("seq-len") || args.Has("precision");
  if (job.input.kind == PlannerInput::Kind::kProfile) {
    if (overrides || args.Has("device") || args.Has("tflops")) {
      return Status::Invalid(path + " is a profile (measured or hand-written sizes and times); "
                             "--micro-batch, --seq-len, --precision, --device and --tflops apply "
                             "to model.json / config.json inputs only");
    }
    job.profile = job.input.profile;
    job.context.input_kind = "profile";
    return job;
  }
  ModelConfig& c = job.input.config;
  REMAT_ASSIGN_OR_RETURN(c.micro_batch, args.GetInt("micro-batch", c.micro_batch, 1, 1 << 24));
  REMAT_ASSIGN_OR_RETURN(c.seq_len, args.GetInt("seq-len", c.seq_len, 1, 1 << 24));
  if (args.Has("precision")) {
    REMAT_ASSIGN_OR_RETURN(c.precision, ParsePrecision(args.Get("precision")));
  }
  if (args.Has("seq-len") && c.architecture != Architecture::kLlama && c.max_position < c.seq_len) {
    c.max_position = c.seq_len;
  }
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(c, path));
  job.context.input_kind =
      job.input.kind == PlannerInput::Kind::kHfConfig ? "config.json" : "model.json";
  job.context.has_config = true;
  job.context.config = c;
  REMAT_ASSIGN_OR_RETURN(job.profile, AnalyticProfile(c, job.analytic));
  return job;
}

Result<std::string> RuntimeDevice(const Args& args) {
  const std::string device = args.Get("runtime-device", "cpu");
  if (device == "cpu" || device == "cuda") return device;
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 8 &&
      device.find_first_not_of("0123456789", 5) == std::string::npos) {
    return device;
  }
  return Status::Invalid("option --runtime-device: unknown device '" + device +
                         "'; accepted: cpu, cuda, cuda:N");
}

}  // namespace remat::cli
