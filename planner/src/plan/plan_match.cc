// Whether a plan file was made for the model it is about to run on: the one
// compatibility check (planner train and anything else that runs a plan).
#include "remat/plan/plan_file.h"

namespace remat {
namespace {

std::string Named(const std::string& model) {
  return model.empty() ? "an unnamed model" : "'" + model + "'";
}

// "embedding, block0..block3, final_norm, head, loss"
std::string ChainSummary(const Profile& p) {
  std::string s;
  for (int i = 0; i < p.num_layers(); ++i) {
    int j = i;
    while (j + 1 < p.num_layers() && p.layers[i].kind == kBlockKind &&
           p.layers[j + 1].kind == kBlockKind) {
      ++j;
    }
    s += (s.empty() ? "" : ", ") + p.layers[i].name;
    if (j > i) s += ".." + p.layers[j].name;
    i = j;
  }
  return s;
}

}  // namespace

Status CheckPlanMatchesProfile(const LoadedPlan& plan, const Profile& profile,
                               const std::string& source) {
  const Profile& planned = plan.profile;
  const std::string models =
      "the plan was made for " + Named(planned.model) + ", this is " + Named(profile.model);
  const std::string advice = "; make a new plan for this model (planner --json -o plan.json)";
  if (!planned.model.empty() && !profile.model.empty() && planned.model != profile.model) {
    return Status::Invalid(source + ": " + models + advice);
  }
  if (planned.num_layers() != profile.num_layers()) {
    return Status::Invalid(
        source + ": " + models + ": the plan's chain has " + std::to_string(planned.num_layers()) +
        " layers (" + ChainSummary(planned) + "), the model's " +
        std::to_string(profile.num_layers()) + " (" + ChainSummary(profile) + ")" + advice);
  }
  const auto known = [](int64_t v) { return v > 0; };
  if ((known(planned.micro_batch) && known(profile.micro_batch) &&
       planned.micro_batch != profile.micro_batch) ||
      (known(planned.seq_len) && known(profile.seq_len) && planned.seq_len != profile.seq_len)) {
    return Status::Invalid(source + ": the plan was made for micro_batch " +
                           std::to_string(planned.micro_batch) + ", seq_len " +
                           std::to_string(planned.seq_len) + "; the model has micro_batch " +
                           std::to_string(profile.micro_batch) + ", seq_len " +
                           std::to_string(profile.seq_len) + advice);
  }
  for (int i = 0; i < profile.num_layers(); ++i) {
    const LayerProfile& a = planned.layers[i];
    const LayerProfile& b = profile.layers[i];
    const std::string where = source + ": " + models + ": layer " + std::to_string(i);
    if (a.name != b.name || a.kind != b.kind) {
      return Status::Invalid(where + " is '" + a.name + "' in the plan but '" + b.name +
                             "' in the model" + advice);
    }
    // The tensors passed between layers: each layer's output is the next
    // one's input. The batch x[0] is not one of them: what it holds (token
    // ids, and the labels in the runtime) is the executor's business, nor
    // is the loss, a scalar no layer reads (in the model's dtype when
    // measured, fp32 in the op model).
    const bool loss = i == profile.num_layers() - 1;
    if (!loss && a.output_bytes != b.output_bytes) {
      return Status::Invalid(where + " ('" + b.name + "'): output_bytes is " +
                             std::to_string(a.output_bytes) + " in the plan but " +
                             std::to_string(b.output_bytes) +
                             " now (another micro-batch, sequence length or precision?)" + advice);
    }
  }
  return Status::Ok();
}

}  // namespace remat
