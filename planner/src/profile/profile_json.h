// A profile to and from JSON values of larger documents (a plan file
// embeds its profile; ParsePlannerInput parses the text once to tell what it
// is). Internal to the planner library.
#ifndef REMAT_SRC_PROFILE_JSON_H_
#define REMAT_SRC_PROFILE_JSON_H_

#include <string>

#include <nlohmann/json.hpp>

#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat::internal {

// ParseProfile (remat/profile/profile.h) on the document its text parses to: the
// same profile, or the same error, without parsing the text again.
Result<Profile> ProfileFromJson(const nlohmann::json& doc, const std::string& source);

// The profile as a JSON value (ProfileToJson's document).
nlohmann::ordered_json ProfileJsonValue(const Profile& profile);

}  // namespace remat::internal

#endif  // REMAT_SRC_PROFILE_JSON_H_
