#include "job.h"

#include "host_link_flags.h"
#include "parallel_flags.h"
#include "traced_input.h"
#include "remat/io/io.h"
#include "remat/profile/graph_profile.h"

namespace remat::cli {

std::vector<FlagSpec> JobFlags() {
  std::vector<FlagSpec> flags = {
      {"device", "NAME", "device for analytic times and memory besides tensors: h100, h100-nvl, gh200, h200, b200, "
       "a100 (default), a10g, l4, l40s, rtx3090, rtx4090, rtx5090, mi300x, cpu (docs/devices.md)"},
      {"tflops", "X", "achieved TFLOP/s for analytic times (overrides --device peaks)"},
      {"micro-batch", "N", "override model.json micro_batch"},
      {"compile", "",
       "plan the step torch.compile (inductor) runs: the config.json (any model_type) traced "
       "with its blocks as compile's partitioner keeps them (python -m remat trace --compile, "
       "docs/compile.md)"},
      {"grad-accumulation", "K",
       "override model.json grad_accumulation (micro-batches per update)"},
      {"seq-len", "N", "override model.json seq_len"},
      {"precision", "P",
       "override precision: fp32, bf16, fp16, amp_bf16, amp_fp16, mixed_bf16, mixed_fp16"},
      {"attention", "A", "override attention: eager, flash, sdpa (config.json's default)"},
      {"lora-rank", "R", "LoRA adapters of rank R on frozen weights (0: full fine-tuning)"},
      {"lora-targets", "LIST",
       "LoRA targets: q,k,v,o,gate,up,down,router or all-linear (HF module names too); default "
       "q,v"},
      {"lora-dropout", "P", "PEFT's lora_dropout of the adapters' input, in [0, 1); default 0"},
      {"quantization", "Q", "base weights of the blocks' linears: none, nf4 (QLoRA)"},
      {"gradients", "G",
       "override gradients: created_in_backward (PyTorch, default), persistent (Megatron)"},
      {"optimizer", "O",
       "override optimizer: adamw, sgd, sgd_momentum, none, adafactor, muon (AdamW for the "
       "non-matrices), adamw8bit, paged_adamw8bit (bitsandbytes), "
       "torchao_adamw8bit, torchao_adamw4bit, torchao_adamw_fp8 (torchao)"},
      {"grad-dtype", "D", "mixed_bf16/mixed_fp16 gradients: fp32, bf16, fp16"},
      {"dropout", "P", "override dropout probability, in [0, 1)"},
      {"head", "H",
       "override head: lm, mlm (encoders), pooling (sentence embeddings), classification"},
      {"pooling", "P", "pooling head: mean (default), cls"},
      {"loss", "L", "override loss: cross_entropy, mnrl (pooling head; the default there)"},
      {"texts-per-example", "N", "mnrl: texts per example, 2 (pairs, default) or 3 (triplets)"},
      {"num-labels", "N", "classification head: labels, default 2"},
      {"merge-columns", "B",
       "mnrl: true (default) runs the columns after the anchors as one pass, false one each"},
      {"chunked-loss", "N",
       "lm head and cross-entropy over N chunks of tokens (fused linear cross-entropy), or "
       "auto; 0: off"},
  };
  for (const FlagSpec& f : HostLinkFlags()) flags.push_back(f);
  for (const FlagSpec& f : ParallelFlags()) flags.push_back(f);
  return flags;
}

Result<std::string> InputPath(const Args& args, const std::string& usage) {
  if (args.positional().empty()) return Status::Invalid("missing input file; usage: " + usage);
  if (args.positional().size() > 1) {
    return Status::Invalid("expected one input file, got " +
                           std::to_string(args.positional().size()) + " ('" + args.positional()[0] +
                           "', '" + args.positional()[1] + "', ...); usage: " + usage);
  }
  return args.positional()[0];
}

namespace {

// --flag NAME read by `parse` (a model.json name parser) into `*out`; the
// error names the flag, the value and what is accepted.
template <typename E>
Status ParseEnumFlag(const Args& args, const char* flag, Result<E> (*parse)(std::string_view),
                     std::optional<E>* out) {
  if (!args.Has(flag)) return Status::Ok();
  Result<E> v = parse(args.Get(flag));
  if (!v.ok()) return v.status().WithPrefix(std::string("option --") + flag);
  *out = *v;
  return Status::Ok();
}

}  // namespace

Result<JobOverrides> ParseJobOverrides(const Args& args) {
  JobOverrides o;
  if (args.Has("micro-batch")) {
    REMAT_ASSIGN_OR_RETURN(o.micro_batch, args.GetInt("micro-batch", 1, 1, 1 << 24));
  }
  if (args.Has("grad-accumulation")) {
    REMAT_ASSIGN_OR_RETURN(o.grad_accumulation, args.GetInt("grad-accumulation", 1, 1, 1 << 24));
  }
  if (args.Has("seq-len")) {
    REMAT_ASSIGN_OR_RETURN(o.seq_len, args.GetInt("seq-len", 1, 1, 1 << 24));
  }
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "precision", ParsePrecision, &o.precision));
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "attention", ParseAttention, &o.attention));
  if (args.Has("lora-rank")) {
    REMAT_ASSIGN_OR_RETURN(o.lora_rank, args.GetInt("lora-rank", 0, 0, 1 << 20));
  }
  if (args.Has("lora-targets")) {
    Result<uint32_t> t = ParseLoraTargets(args.Get("lora-targets"));
    if (!t.ok()) return t.status().WithPrefix("option --lora-targets");
    o.lora_targets = *t;
  }
  if (args.Has("lora-dropout")) {
    const Result<double> p = args.GetDouble("lora-dropout", 0, 0, 1);
    if (!p.ok() || *p >= 1) {
      return Status::Invalid("option --lora-dropout: expected a probability in [0, 1) (PEFT's " +
                             std::string("lora_dropout), got '") + args.Get("lora-dropout") + "'");
    }
    o.lora_dropout = *p;
  }
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "quantization", ParseQuantization, &o.quantization));
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "gradients", ParseGradients, &o.gradients));
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "optimizer", ParseOptimizer, &o.optimizer));
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "grad-dtype", ParseGradDtype, &o.grad_dtype));
  if (args.Has("dropout")) {
    REMAT_ASSIGN_OR_RETURN(o.dropout, args.GetDouble("dropout", 0, 0, 0.999999));
  }
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "head", ParseHead, &o.head));
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "pooling", ParsePooling, &o.pooling));
  REMAT_RETURN_IF_ERROR(ParseEnumFlag(args, "loss", ParseLoss, &o.loss));
  if (args.Has("texts-per-example")) {
    REMAT_ASSIGN_OR_RETURN(o.texts_per_example, args.GetInt("texts-per-example", 1, 1, 1024));
  }
  if (args.Has("num-labels")) {
    REMAT_ASSIGN_OR_RETURN(o.num_labels, args.GetInt("num-labels", 2, 1, 1 << 24));
  }
  if (args.Has("merge-columns")) {
    const std::string v = args.Get("merge-columns");
    if (v != "true" && v != "false") {
      return Status::Invalid("option --merge-columns: expected true or false, got '" + v + "'");
    }
    o.merge_columns = v == "true";
  }
  if (args.Has("chunked-loss")) {
    const std::string v = args.Get("chunked-loss");
    if (v == "auto") {
      o.loss_chunks = kLossChunksAuto;
    } else {
      const Result<int64_t> n = args.GetInt("chunked-loss", 0, 0, 1 << 24);
      if (!n.ok()) {
        return Status::Invalid("option --chunked-loss: expected a number of chunks in [0, " +
                               std::to_string(1 << 24) + "] (0: off) or auto, got '" + v + "'");
      }
      o.loss_chunks = *n;
    }
  }
  REMAT_ASSIGN_OR_RETURN(o.parallel, ParseParallelFlags(args));
  if (args.Has("device")) o.device = args.Get("device");
  if (args.Has("tflops")) {
    REMAT_ASSIGN_OR_RETURN(o.tflops, args.GetDouble("tflops", 0, 1e-6, 1e9));
  }
  return o;
}

Result<Job> LoadJobFromArgs(const std::string& path, const Args& args) {
  REMAT_ASSIGN_OR_RETURN(const std::optional<std::string> traced, TracedProfilePath(path, args));
  return LoadJobFromArgs(path, args, traced);
}

Result<Job> LoadJobFromArgs(const std::string& path, const Args& args,
                            const std::optional<std::string>& traced) {
  REMAT_ASSIGN_OR_RETURN(JobOverrides overrides, ParseJobOverrides(args));
  if (traced) {  // the trace took the job's sizes, precision, device and step in
    if (Result<std::string> text = ReadTextFile(*traced); text.ok() && IsGraphProfileText(*text)) {
      return Status::Invalid(path + ": traces as a graph of chains (an encoder-decoder, " +
                             *traced + "); planner plan plans it (docs/graphs.md), this command "
                             "takes one chain");
    }
    overrides.micro_batch.reset();
    overrides.seq_len.reset();
    overrides.precision.reset();
    overrides.device.reset();
    overrides.head.reset();
    overrides.pooling.reset();
    overrides.loss.reset();
    overrides.texts_per_example.reset();
    overrides.merge_columns.reset();
  }
  REMAT_ASSIGN_OR_RETURN(Job job, LoadJob(traced ? *traced : path, overrides));
  REMAT_RETURN_IF_ERROR(
      ApplyHostLinkFlags(args, &job.profile, job.parallel().offload != StateOffload::kNone));
  for (RankMemory& r : job.ranks) r.profile.host_link = job.profile.host_link;
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
