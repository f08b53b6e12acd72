// The allocator trace file: a plan's replayed allocation sequence and what
// the allocator model did with it (remat/report/report.h, docs/device-memory.md).
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "remat/report/report.h"

namespace remat {
namespace {

nlohmann::ordered_json SegmentsJson(const std::vector<AllocatorSegmentView>& segments) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const AllocatorSegmentView& s : segments) {
    nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
    for (const AllocatorSegmentView::Block& b : s.blocks) {
      blocks.push_back({b.size_bytes, b.allocated});
    }
    out.push_back({{"total_bytes", s.total_bytes()},
                   {"small_pool", s.small_pool},
                   {"expandable", s.expandable},
                   {"blocks", blocks}});
  }
  return out;
}

}  // namespace

std::string AllocatorTraceJson(const TrainingStepReplay& replay, const ReplayTrace& trace,
                               const std::string& alloc_conf) {
  nlohmann::ordered_json j;
  j["alloc_conf"] = alloc_conf;
  j["micro_steps"] = replay.summary.micro_steps;
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const AllocEvent& e : trace.events) {
    if (e.kind == AllocEvent::Kind::kAlloc) {
      events.push_back({"a", e.id, e.size_bytes});
    } else {
      events.push_back({"f", e.id});
    }
  }
  j["events"] = events;
  j["predicted"] = {{"reserved_peak_bytes", replay.reserved_peak_bytes},
                    {"allocated_peak_bytes", replay.allocated_peak_bytes},
                    {"steady", replay.summary.steady},
                    {"reserved_timeline_bytes", trace.reserved_timeline_bytes},
                    {"allocated_timeline_bytes", trace.allocated_timeline_bytes},
                    {"segments", SegmentsJson(trace.segments)}};
  return internal::DumpDocument(j);
}

}  // namespace remat
