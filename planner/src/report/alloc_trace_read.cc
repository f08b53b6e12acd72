// Reading an allocator trace file (remat/report/alloc_trace.h).
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "remat/report/alloc_trace.h"

namespace remat {
namespace {

Status ReadEvents(const nlohmann::json& j, const std::string& where,
                  std::vector<AllocEvent>* out) {
  if (!j.is_array()) return Status::Invalid(where + ": field 'events': must be an array");
  out->reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    const std::string at = where + ": events[" + std::to_string(i) + "]";
    const bool alloc = e.is_array() && e.size() == 3 && e[0] == "a";
    const bool free = e.is_array() && e.size() == 2 && e[0] == "f";
    if ((!alloc && !free) || !e[1].is_number_integer() ||
        (alloc && (!e[2].is_number_integer() || e[2].get<int64_t>() < 0))) {
      return Status::Invalid(at + ": expected [\"a\", id, bytes >= 0] or [\"f\", id], got " +
                             internal::DescribeJsonValue(e));
    }
    out->push_back(alloc ? AllocEvent::Alloc(e[1].get<int64_t>(), e[2].get<int64_t>())
                         : AllocEvent::Free(e[1].get<int64_t>()));
  }
  return Status::Ok();
}

Status ReadSide(const nlohmann::json& j, const std::string& where, size_t events,
                AllocatorTraceSide* out) {
  if (!j.is_object()) return Status::Invalid(where + ": must be an object");
  internal::JsonObjectReader r(j, where);
  REMAT_RETURN_IF_ERROR(r.Int("reserved_peak_bytes", &out->reserved_peak_bytes, true, 0));
  REMAT_RETURN_IF_ERROR(r.Int("allocated_peak_bytes", &out->allocated_peak_bytes, true, 0));
  REMAT_RETURN_IF_ERROR(r.String("device", &out->device, false));
  const auto timeline = j.find("reserved_timeline_bytes");
  if (timeline == j.end() || !timeline->is_array() || timeline->size() != events) {
    return r.Error("reserved_timeline_bytes",
                   "must be an array of " + std::to_string(events) + " byte counts, one per event");
  }
  for (const nlohmann::json& v : *timeline) {
    if (!v.is_number_integer()) {
      return r.Error("reserved_timeline_bytes", "holds " + internal::DescribeJsonValue(v));
    }
    out->reserved_timeline_bytes.push_back(v.get<int64_t>());
  }
  return Status::Ok();
}

}  // namespace

Result<AllocatorTraceFile> ParseAllocatorTrace(std::string_view text, const std::string& where) {
  REMAT_ASSIGN_OR_RETURN(const nlohmann::json j, internal::ParseJson(text, where));
  if (!j.is_object()) return Status::Invalid(where + ": expected a JSON object");
  AllocatorTraceFile out;
  internal::JsonObjectReader r(j, where);
  REMAT_RETURN_IF_ERROR(r.String("alloc_conf", &out.alloc_conf, false));
  if (!j.contains("events")) return r.Error("events", "is missing");
  REMAT_RETURN_IF_ERROR(ReadEvents(j["events"], where, &out.events));
  if (!j.contains("predicted")) return r.Error("predicted", "is missing");
  REMAT_RETURN_IF_ERROR(
      ReadSide(j["predicted"], where + ": predicted", out.events.size(), &out.predicted));
  if (j.contains("measured")) {
    AllocatorTraceSide m;
    REMAT_RETURN_IF_ERROR(ReadSide(j["measured"], where + ": measured", out.events.size(), &m));
    out.measured = std::move(m);
  }
  return out;
}

}  // namespace remat
