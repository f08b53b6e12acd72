// The memo of simulations and allocator replays per profile object
// (remat/plan/plan_memo.h): a table from profile address to the memos open
// for it, each memo a hash map from schedule to result.
#include "remat/plan/plan_memo.h"

#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remat {
namespace {

// A memo stops taking new results past this many ops and timeline points
// held (about 70 MiB): the searches repeat recent schedules, so a full memo
// still answers most of them.
constexpr size_t kMaxHeldPoints = size_t{1} << 19;

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// The hash of a schedule's ops and layer count: each op's six fields
// read as three words, folded into one, mixed by a multiply (equal keys
// compare every field).
uint64_t ScheduleHash(const Schedule& schedule) {
  static_assert(sizeof(Op) == 3 * sizeof(uint64_t) && std::is_trivially_copyable_v<Op>);
  uint64_t h = static_cast<uint64_t>(schedule.num_layers);
  for (const Op& op : schedule.ops) {
    uint64_t w[3];
    std::memcpy(w, &op, sizeof(w));
    h = (h ^ w[0] ^ (w[1] << 21 | w[1] >> 43) ^ (w[2] << 42 | w[2] >> 22)) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  return h;
}

// A schedule and its tag; a lookup's key points at the caller's schedule
// (no copy), a stored key owns its copy. The schedule's hash is computed
// once per key, not again by each find and emplace.
struct Key {
  Key(int t, const Schedule& s) : tag(t), hash(ScheduleHash(s)), view(&s) {}
  // The key stored: `k` with its own copy of the schedule.
  static Key Owning(const Key& k) {
    Key out = k;
    out.owned = *k.view;
    out.view = nullptr;
    return out;
  }
  const Schedule& schedule() const { return view != nullptr ? *view : owned; }
  int tag = 0;  // the detail of a simulation; the options and limit of a replay
  uint64_t hash = 0;
  const Schedule* view = nullptr;
  Schedule owned;
  bool operator==(const Key& o) const {
    const Schedule& schedule = this->schedule();
    const Schedule& other = o.schedule();
    if (tag != o.tag || hash != o.hash || schedule.num_layers != other.num_layers ||
        schedule.ops.size() != other.ops.size()) {
      return false;
    }
    for (size_t i = 0; i < schedule.ops.size(); ++i) {
      const Op& a = schedule.ops[i];
      const Op& b = other.ops[i];
      if (a.kind != b.kind || a.layer != b.layer || a.save != b.save || a.option != b.option ||
          !(a.tensor == b.tensor)) {
        return false;
      }
    }
    return true;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(Mix(k.hash, static_cast<uint64_t>(k.tag)));
  }
};

bool SameOptions(const AllocatorOptions& a, const AllocatorOptions& b) {
  return a.expandable_segments == b.expandable_segments &&
         a.max_split_size_bytes == b.max_split_size_bytes &&
         a.max_non_split_rounding_bytes == b.max_non_split_rounding_bytes &&
         a.large_segment_bytes == b.large_segment_bytes &&
         a.garbage_collection_threshold == b.garbage_collection_threshold &&
         a.roundup_power2_divisions == b.roundup_power2_divisions &&
         a.per_process_memory_fraction == b.per_process_memory_fraction &&
         a.ignored_keys == b.ignored_keys;
}

}  // namespace

struct PlanMemo::Store {
  std::mutex mu;
  size_t held = 0;  // ops and timeline points held
  PlanMemo::Stats stats;
  std::unordered_map<Key, SimulationResult, KeyHash> simulations;
  // Replays: the options and limits seen (a key's tag indexes them).
  std::vector<std::pair<AllocatorOptions, AllocatorLimit>> settings;
  std::unordered_map<Key, TrainingStepReplay, KeyHash> replays;
  // plan_memo::Keep's values, by name.
  std::map<std::string, std::shared_ptr<const void>> kept;

  bool Room(size_t more) const { return held + more <= kMaxHeldPoints; }
};

namespace {

// The memos open, by profile address (the innermost last).
std::mutex& TableMutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<const Profile*, std::vector<std::shared_ptr<PlanMemo::Store>>>& Table() {
  static auto* table =
      new std::unordered_map<const Profile*, std::vector<std::shared_ptr<PlanMemo::Store>>>();
  return *table;
}

std::shared_ptr<PlanMemo::Store> StoreFor(const Profile& profile) {
  std::lock_guard<std::mutex> lock(TableMutex());
  auto it = Table().find(&profile);
  if (it == Table().end() || it->second.empty()) return nullptr;
  return it->second.back();
}

}  // namespace

PlanMemo::PlanMemo(const Profile& profile, Open open) : profile_(profile) {
  std::lock_guard<std::mutex> lock(TableMutex());
  std::vector<std::shared_ptr<Store>>& stores = Table()[&profile_];
  store_ = open == Open::kJoin && !stores.empty() ? stores.back() : std::make_shared<Store>();
  // Joined, the store is open twice: the innermost entry goes with this memo.
  stores.push_back(store_);
}

PlanMemo::~PlanMemo() {
  std::lock_guard<std::mutex> lock(TableMutex());
  auto it = Table().find(&profile_);
  if (it == Table().end()) return;
  std::vector<std::shared_ptr<Store>>& open = it->second;
  for (size_t i = open.size(); i-- > 0;) {
    if (open[i] == store_) {
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (open.empty()) Table().erase(it);
}

PlanMemo::Stats PlanMemo::stats() const {
  std::lock_guard<std::mutex> lock(store_->mu);
  return store_->stats;
}

namespace plan_memo {

Result<SimulationResult> Simulated(const Profile& profile, const Schedule& schedule,
                                   SimulationDetail detail) {
  std::shared_ptr<PlanMemo::Store> store = StoreFor(profile);
  if (store == nullptr) return Simulate(profile, schedule, nullptr, detail);
  const Key key(static_cast<int>(detail), schedule);
  {
    std::lock_guard<std::mutex> lock(store->mu);
    auto it = store->simulations.find(key);
    if (it != store->simulations.end()) {
      ++store->stats.simulations_reused;
      return it->second;
    }
  }
  Result<SimulationResult> result = Simulate(profile, schedule, nullptr, detail);
  if (!result.ok()) return result;
  const size_t size = schedule.ops.size() + result->timeline.size();
  std::lock_guard<std::mutex> lock(store->mu);
  ++store->stats.simulations_run;
  if (store->Room(size) && store->simulations.emplace(Key::Owning(key), *result).second) {
    store->held += size;
  }
  return result;
}

Result<TrainingStepReplay> Replayed(const Profile& profile, const Schedule& schedule,
                                    const AllocatorOptions& options, const AllocatorLimit& limit) {
  std::shared_ptr<PlanMemo::Store> store = StoreFor(profile);
  if (store == nullptr) return ReplayTrainingSteps(profile, schedule, options, limit);
  Key key(-1, schedule);
  {
    std::lock_guard<std::mutex> lock(store->mu);
    for (size_t i = 0; i < store->settings.size(); ++i) {
      const auto& [o, l] = store->settings[i];
      if (SameOptions(o, options) && l.driver_bytes == limit.driver_bytes &&
          l.fraction_cap_bytes == limit.fraction_cap_bytes) {
        key.tag = static_cast<int>(i);
        break;
      }
    }
    if (key.tag >= 0) {
      auto it = store->replays.find(key);
      if (it != store->replays.end()) {
        ++store->stats.replays_reused;
        return it->second;
      }
    }
  }
  Result<TrainingStepReplay> result = ReplayTrainingSteps(profile, schedule, options, limit);
  if (!result.ok()) return result;
  std::lock_guard<std::mutex> lock(store->mu);
  ++store->stats.replays_run;
  if (key.tag < 0) {
    for (size_t i = 0; i < store->settings.size() && key.tag < 0; ++i) {
      const auto& [o, l] = store->settings[i];
      if (SameOptions(o, options) && l.driver_bytes == limit.driver_bytes &&
          l.fraction_cap_bytes == limit.fraction_cap_bytes) {
        key.tag = static_cast<int>(i);
      }
    }
    if (key.tag < 0) {
      key.tag = static_cast<int>(store->settings.size());
      store->settings.emplace_back(options, limit);
    }
  }
  const size_t size = schedule.ops.size();
  if (store->Room(size) && store->replays.emplace(Key::Owning(key), *result).second) {
    store->held += size;
  }
  return result;
}

std::shared_ptr<const void> Kept(const Profile& profile, const std::string& name) {
  std::shared_ptr<PlanMemo::Store> store = StoreFor(profile);
  if (store == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(store->mu);
  auto it = store->kept.find(name);
  return it == store->kept.end() ? nullptr : it->second;
}

void Keep(const Profile& profile, const std::string& name, std::shared_ptr<const void> value) {
  std::shared_ptr<PlanMemo::Store> store = StoreFor(profile);
  if (store == nullptr) return;
  std::lock_guard<std::mutex> lock(store->mu);
  store->kept.emplace(name, std::move(value));
}

}  // namespace plan_memo
}  // namespace remat
