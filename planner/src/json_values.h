// JSON values of the planner's structures, for embedding in larger documents.
#ifndef REMAT_SRC_JSON_VALUES_H_
#define REMAT_SRC_JSON_VALUES_H_

#include <nlohmann/json.hpp>

#include "remat/profile.h"
#include "remat/schedule.h"

namespace remat {

nlohmann::ordered_json ScheduleJsonValue(const Schedule& schedule);
nlohmann::ordered_json ProfileJsonValue(const Profile& profile);

}  // namespace remat

#endif  // REMAT_SRC_JSON_VALUES_H_
