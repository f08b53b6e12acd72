// A schedule as a JSON value, for embedding in larger documents (a plan
// file). Internal to the planner library.
#ifndef REMAT_SRC_SCHEDULE_JSON_H_
#define REMAT_SRC_SCHEDULE_JSON_H_

#include <nlohmann/json.hpp>

#include "remat/schedule/schedule.h"

namespace remat::internal {

// ScheduleToJson's value.
nlohmann::ordered_json ScheduleJsonValue(const Schedule& schedule);

}  // namespace remat::internal

#endif  // REMAT_SRC_SCHEDULE_JSON_H_
