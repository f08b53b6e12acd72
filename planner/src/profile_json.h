// A profile from an already parsed JSON document, for callers that parsed
// the text to tell what it is (ParsePlannerInput). Internal to the planner
// library.
#ifndef REMAT_SRC_PROFILE_JSON_H_
#define REMAT_SRC_PROFILE_JSON_H_

#include <string>

#include <nlohmann/json.hpp>

#include "remat/profile.h"
#include "remat/status.h"

namespace remat {

// ParseProfile (remat/profile.h) on the document its text parses to: the
// same profile, or the same error, without parsing the text again.
Result<Profile> ProfileFromJson(const nlohmann::json& doc, const std::string& source);

}  // namespace remat

#endif  // REMAT_SRC_PROFILE_JSON_H_
