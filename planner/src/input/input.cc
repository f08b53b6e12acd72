#include "remat/input/input.h"

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "profile/profile_json.h"
#include "remat/io/io.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::ParseJson;
using internal::ProfileFromJson;

const char* ToString(PlannerInput::Kind kind) {
  switch (kind) {
    case PlannerInput::Kind::kModel:
      return "model.json";
    case PlannerInput::Kind::kHfConfig:
      return "config.json";
    case PlannerInput::Kind::kProfile:
      return "profile";
  }
  return "model.json";
}

Result<PlannerInput> ParsePlannerInput(std::string_view text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(text, source));
  if (!doc.is_object()) {
    return Status::Invalid(source + ": expected a JSON object (model.json, config.json or a "
                                    "profile), got " + DescribeJsonValue(doc));
  }
  PlannerInput in;
  in.path = source;
  if (doc.contains("layers") && doc.at("layers").is_array()) {
    in.kind = PlannerInput::Kind::kProfile;
    REMAT_ASSIGN_OR_RETURN(in.profile, ProfileFromJson(doc, source));  // parsed once
  } else if (doc.contains("model_type")) {
    in.kind = PlannerInput::Kind::kHfConfig;
    REMAT_ASSIGN_OR_RETURN(in.config, ParseHfConfig(text, source));
    const auto job = doc.find("remat");
    in.default_seq_len = job == doc.end() || !job->is_object() || !job->contains("seq_len") ||
                         job->at("seq_len").is_null();
  } else {
    in.kind = PlannerInput::Kind::kModel;
    REMAT_ASSIGN_OR_RETURN(in.config, ParseModelConfig(text, source));
  }
  return in;
}

Result<PlannerInput> LoadPlannerInput(const std::string& path) {
  REMAT_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParsePlannerInput(text, path);
}

}  // namespace remat
