// JSON values of the planner's structures, for embedding in larger documents.
#ifndef REMAT_SRC_JSON_VALUES_H_
#define REMAT_SRC_JSON_VALUES_H_

#include <string>

#include <nlohmann/json.hpp>

#include "remat/profile.h"
#include "remat/schedule.h"

namespace remat {

// A document as written to a file: 2-space indent and a final newline. A
// string that is not valid UTF-8 (a Latin-1 file name from the command line)
// gets U+FFFD in place of its bad bytes; nlohmann's default would throw.
inline std::string DumpDocument(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

nlohmann::ordered_json ScheduleJsonValue(const Schedule& schedule);
nlohmann::ordered_json ProfileJsonValue(const Profile& profile);

}  // namespace remat

#endif  // REMAT_SRC_JSON_VALUES_H_
