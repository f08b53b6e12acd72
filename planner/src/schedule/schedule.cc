#include "remat/schedule/schedule.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_fields.h"
#include "remat/profile/profile.h"
#include "schedule/schedule_json.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::JsonObjectReader;
using internal::ParseJson;
using internal::ScheduleJsonValue;
namespace {

const char* SaveName(SaveMode s) {
  switch (s) {
    case SaveMode::kNone:
      return "none";
    case SaveMode::kAll:
      return "all";
    case SaveMode::kSelective:
      return "selective";
  }
  return "?";
}

// For each allocation (a write, or x[0] live at start), its last use.
struct Alloc {
  TensorRef tensor;
  int last_use;  // op position; -1 = before the first op
};

struct AddFreesScratch {
  std::vector<Alloc> allocs;
  std::vector<int> current, first, next;
  std::vector<TensorRef> frees;
};

}  // namespace

Schedule AddFrees(const std::vector<Op>& compute_ops, int num_layers) {
  const ChainGraph& graph = ChainGraph::For(num_layers);
  const int n = static_cast<int>(compute_ops.size());
  // The working arrays live per thread and keep their capacity between
  // calls: AddFrees runs once per candidate schedule.
  thread_local AddFreesScratch scratch;
  std::vector<Alloc>& allocs = scratch.allocs;
  std::vector<int>& current = scratch.current;  // tensor -> index into allocs
  std::vector<int>& first = scratch.first;
  std::vector<int>& next = scratch.next;
  std::vector<TensorRef>& frees = scratch.frees;
  allocs.clear();
  current.assign(graph.num_tensors(), -1);
  allocs.push_back({TensorRef{TensorKind::kX, 0}, -1});
  current[graph.TensorIndex({TensorKind::kX, 0})] = 0;
  for (int p = 0; p < n; ++p) {
    const Op& op = compute_ops[p];
    for (const TensorRef& t : graph.Reads(op)) {
      const int a = current[graph.TensorIndex(t)];
      if (a >= 0) allocs[a].last_use = p;
    }
    for (const TensorRef& t : graph.Writes(op)) {
      current[graph.TensorIndex(t)] = static_cast<int>(allocs.size());
      allocs.push_back({t, p});
    }
  }
  // frees[first[p + 1] .. first[p + 2]) are the tensors freed right after
  // op p (p = -1: before op 0), in allocation order (a counting sort: one
  // array, not a vector per op).
  first.assign(n + 3, 0);
  for (const Alloc& a : allocs) ++first[a.last_use + 2];
  for (int p = 1; p < n + 3; ++p) first[p] += first[p - 1];
  frees.resize(allocs.size());
  next.assign(first.begin(), first.end() - 1);
  for (const Alloc& a : allocs) frees[next[a.last_use + 1]++] = a.tensor;
  Schedule out;
  out.num_layers = num_layers;
  out.ops.reserve(compute_ops.size() + allocs.size());
  auto free_after = [&](int p) {
    for (int k = first[p + 1]; k < first[p + 2]; ++k) out.ops.push_back(Op::Free(frees[k]));
  };
  free_after(-1);
  for (int p = 0; p < n; ++p) {
    out.ops.push_back(compute_ops[p]);
    free_after(p);
  }
  return out;
}

Status ValidateSchedule(const Schedule& schedule, const Profile& profile) {
  const int L = profile.num_layers();
  if (schedule.num_layers != L) {
    return Status::Invalid("the schedule is for " + std::to_string(schedule.num_layers) +
                           " layers but the profile has " + std::to_string(L));
  }
  return ValidateSchedule(schedule, profile, ChainGraph::For(L));
}

Status ValidateSchedule(const Schedule& schedule, const Profile& profile, const ChainGraph& graph) {
  const int L = profile.num_layers();
  if (schedule.num_layers != L || graph.num_layers() != L) {
    return Status::Invalid("the schedule is for " + std::to_string(schedule.num_layers) +
                           " layers but the profile has " + std::to_string(L));
  }
  // 0: not live; 1: live on the device; 2: live on the host (offloaded).
  std::vector<char> live(graph.num_tensors(), 0);
  live[graph.TensorIndex({TensorKind::kX, 0})] = 1;
  std::vector<char> with_graph(L + 1, 0);  // x[i] written by a forward with grad
  std::vector<int> forwards(L, 0), backwards(L, 0);
  bool stepped = false;
  for (size_t p = 0; p < schedule.ops.size(); ++p) {
    const Op& op = schedule.ops[p];
    // Built only when reporting an error: validation runs in solver loops.
    auto where = [&] { return "schedule op " + std::to_string(p) + " (" + DescribeOp(op) + ")"; };
    if (op.kind == OpKind::kFree) {
      if (op.tensor.index < 0 || op.tensor.index > L ||
          (op.tensor.kind != TensorKind::kX && op.tensor.index == L)) {
        return Status::Invalid(where() + ": no such tensor in a " + std::to_string(L) +
                               "-layer chain");
      }
      char& slot = live[graph.TensorIndex(op.tensor)];
      if (!slot) {
        return Status::Invalid(where() + ": " + TensorName(op.tensor) + " is not live");
      }
      slot = 0;
      continue;
    }
    if (op.kind == OpKind::kOffload || op.kind == OpKind::kPrefetch) {
      const TensorRef t = op.tensor;
      if (t.kind != TensorKind::kX || t.index < 1 || t.index >= L) {
        return Status::Invalid(where() + ": only a checkpoint x<i>, 1 <= i < " + std::to_string(L) +
                               ", can move to host memory");
      }
      if (!profile.host_link.present()) {
        return Status::Invalid(where() +
                               ": the profile has no host link to offload over "
                               "(--host-link)");
      }
      char& slot = live[graph.TensorIndex(t)];
      if (op.kind == OpKind::kOffload) {
        if (slot != 1) {
          return Status::Invalid(where() + ": " + TensorName(t) + " is not live on the device");
        }
        if (with_graph[t.index] || live[graph.TensorIndex({TensorKind::kA, t.index})]) {
          return Status::Invalid(where() + ": " + TensorName(t) +
                                 " is held by a saved graph; only a checkpoint (written without "
                                 "grad, its layer's a not live) can move");
        }
        slot = 2;
      } else {
        if (slot != 2)
          return Status::Invalid(where() + ": " + TensorName(t) + " is not on the host");
        slot = 1;
      }
      continue;
    }
    if (op.kind == OpKind::kOptimizerStep) {
      if (stepped) return Status::Invalid(where() + ": a second optimizer step");
      stepped = true;
      continue;
    }
    if (op.layer < 0 || op.layer >= L) {
      return Status::Invalid(where() + ": layer out of range, the chain has " + std::to_string(L) +
                             " layers");
    }
    if (stepped) return Status::Invalid(where() + ": runs after the optimizer step");
    if (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute) {
      if (op.kind == OpKind::kForward && forwards[op.layer] > 0) {
        return Status::Invalid(where() +
                               ": layer already ran forward; a second forward is a recompute");
      }
      if (op.kind == OpKind::kRecompute && forwards[op.layer] == 0) {
        return Status::Invalid(where() + ": recompute before the layer's first forward");
      }
      if (op.save == SaveMode::kSelective) {
        const auto& opts = profile.layers[op.layer].selective;
        if (op.option < 0 || op.option >= static_cast<int>(opts.size())) {
          return Status::Invalid(where() + ": layer '" + profile.layers[op.layer].name + "' has " +
                                 std::to_string(opts.size()) + " selective options");
        }
      }
      ++forwards[op.layer];
    }
    if (op.kind == OpKind::kBackward) {
      if (backwards[op.layer]++ > 0)
        return Status::Invalid(where() + ": second backward of the layer");
    }
    for (const TensorRef& t : graph.Reads(op)) {
      const char slot = live[graph.TensorIndex(t)];
      if (slot != 1) {
        return Status::Invalid(where() + ": needs " + TensorName(t) + ", which is " +
                               (slot == 2 ? "on the host (no prefetch before it)" : "not live"));
      }
    }
    for (const TensorRef& t : graph.Writes(op)) {
      char& slot = live[graph.TensorIndex(t)];
      if (slot) {
        return Status::Invalid(where() + ": writes " + TensorName(t) + " while it is still live");
      }
      slot = 1;
      if (t.kind == TensorKind::kX) with_graph[t.index] = op.save != SaveMode::kNone;
    }
  }
  for (int i = 0; i < L; ++i) {
    if (backwards[i] == 0) {
      return Status::Invalid("the schedule never runs the backward of layer " + std::to_string(i) +
                             " ('" + profile.layers[i].name + "')");
    }
  }
  return Status::Ok();
}

Result<std::vector<OffloadPlace>> PlaceOffloads(const Schedule& schedule,
                                                const std::vector<int>& xs, int prefetch_lead) {
  const int L = schedule.num_layers;
  const ChainGraph& graph = ChainGraph::For(L);
  const int n = static_cast<int>(schedule.ops.size());
  auto is_compute = [](const Op& op) {
    return op.kind == OpKind::kForward || op.kind == OpKind::kRecompute ||
           op.kind == OpKind::kBackward;
  };
  // One pass over the ops: each layer's first forward or recompute, and
  // the ops that read each x[i] (in order).
  std::vector<int> first_forward(L, -1);
  std::vector<int> read_begin(L + 2, 0);
  for (int p = 0; p < n; ++p) {
    const Op& op = schedule.ops[p];
    if ((op.kind == OpKind::kForward || op.kind == OpKind::kRecompute) && op.layer >= 0 &&
        op.layer < L && first_forward[op.layer] < 0) {
      first_forward[op.layer] = p;
    }
    for (const TensorRef& t : graph.Reads(op)) {
      if (t.kind == TensorKind::kX && t.index >= 0 && t.index <= L) ++read_begin[t.index + 1];
    }
  }
  for (int i = 1; i < L + 2; ++i) read_begin[i] += read_begin[i - 1];
  std::vector<int> readers(read_begin[L + 1]);
  {
    std::vector<int> next(read_begin.begin(), read_begin.end() - 1);
    for (int p = 0; p < n; ++p) {
      for (const TensorRef& t : graph.Reads(schedule.ops[p])) {
        if (t.kind == TensorKind::kX && t.index >= 0 && t.index <= L) readers[next[t.index]++] = p;
      }
    }
  }
  // The first op after position `after` that reads x[i] (n: none).
  auto next_read = [&](int i, int after) {
    const auto begin = readers.begin() + read_begin[i], end = readers.begin() + read_begin[i + 1];
    const auto it = std::upper_bound(begin, end, after);
    return it == end ? n : *it;
  };
  std::vector<OffloadPlace> places;
  places.reserve(xs.size());
  std::vector<char> seen(L + 1, 0);
  for (int i : xs) {
    auto x = [&] { return "x" + std::to_string(i); };
    if (i < 1 || i >= L) {
      return Status::Invalid("cannot offload " + x() + ": only x1..x" + std::to_string(L - 1) +
                             " are checkpoints of a " + std::to_string(L) + "-layer chain");
    }
    if (seen[i]++) return Status::Invalid("offload of " + x() + " asked twice");
    const int w = first_forward[i - 1];
    if (w < 0 || schedule.ops[w].save != SaveMode::kNone) {
      return Status::Invalid("cannot offload " + x() + ": it is not a checkpoint (layer " +
                             std::to_string(i - 1) + " runs forward with grad)");
    }
    const int r1 = next_read(i, w);
    const int r2 = r1 < n ? next_read(i, r1) : n;
    if (r1 >= n || r2 >= n || schedule.ops[r1].save != SaveMode::kNone) {
      return Status::Invalid("cannot offload " + x() +
                             ": it is not a checkpoint (not kept without grad until a later read)");
    }
    int out = r1 + 1;  // after r1 and the frees that follow it
    while (out < n && schedule.ops[out].kind == OpKind::kFree) ++out;
    int in = r2;
    for (int k = 0; k < prefetch_lead; ++k) {
      int q = in - 1;
      while (q >= out && !is_compute(schedule.ops[q])) --q;
      if (q < out) break;
      in = q;
    }
    places.push_back(OffloadPlace{i, out, in});
  }
  return places;
}

Schedule WithOffloads(const Schedule& schedule, const std::vector<OffloadPlace>& places,
                      size_t count) {
  count = std::min(count, places.size());
  // The copies in the order they are inserted: by position, the offloads
  // before the prefetches there, each kind in the order of `places`.
  struct Insert {
    int before;  // the op position it goes before
    int kind;    // 0: offload, 1: prefetch
    int x;
  };
  std::vector<Insert> inserts;
  inserts.reserve(2 * count);
  for (size_t k = 0; k < count; ++k) {
    inserts.push_back(Insert{places[k].out, 0, places[k].x});
    inserts.push_back(Insert{places[k].in, 1, places[k].x});
  }
  std::stable_sort(inserts.begin(), inserts.end(), [](const Insert& a, const Insert& b) {
    return a.before != b.before ? a.before < b.before : a.kind < b.kind;
  });
  Schedule result;
  result.num_layers = schedule.num_layers;
  result.ops.reserve(schedule.ops.size() + inserts.size());
  const int n = static_cast<int>(schedule.ops.size());
  size_t next = 0;
  for (int p = 0; p <= n; ++p) {
    for (; next < inserts.size() && inserts[next].before == p; ++next) {
      const TensorRef x{TensorKind::kX, inserts[next].x};
      result.ops.push_back(inserts[next].kind == 0 ? Op::Offload(x) : Op::Prefetch(x));
    }
    if (p < n) result.ops.push_back(schedule.ops[p]);
  }
  return result;
}

Result<Schedule> InsertOffloads(const Schedule& schedule, const std::vector<int>& xs,
                                int prefetch_lead) {
  REMAT_ASSIGN_OR_RETURN(const std::vector<OffloadPlace> places,
                         PlaceOffloads(schedule, xs, prefetch_lead));
  return WithOffloads(schedule, places, places.size());
}

std::string TensorName(TensorRef t) {
  const char* k = t.kind == TensorKind::kX ? "x" : t.kind == TensorKind::kA ? "a" : "g";
  return k + std::to_string(t.index);
}

Result<TensorRef> ParseTensorName(std::string_view name) {
  const std::string s(name);
  auto bad = [&] {
    return Status::Invalid("bad tensor name '" + s + "', expected x<i>, a<i> or g<i> (e.g. a3)");
  };
  if (s.size() < 2 || s.size() > 9) return bad();
  TensorRef t;
  if (s[0] == 'x')
    t.kind = TensorKind::kX;
  else if (s[0] == 'a')
    t.kind = TensorKind::kA;
  else if (s[0] == 'g')
    t.kind = TensorKind::kG;
  else
    return bad();
  int value = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return bad();
    value = value * 10 + (s[i] - '0');
  }
  t.index = value;
  return t;
}

std::string DescribeOp(const Op& op) {
  const std::string layer = std::to_string(op.layer);
  auto mode = [&] {
    switch (op.save) {
      case SaveMode::kNone:
        return std::string("no grad");
      case SaveMode::kAll:
        return std::string("save");
      case SaveMode::kSelective:
        return "selective " + std::to_string(op.option);
    }
    return std::string();
  };
  switch (op.kind) {
    case OpKind::kForward:
      return "forward " + layer + " (" + mode() + ")";
    case OpKind::kRecompute:
      return "recompute " + layer + " (" + mode() + ")";
    case OpKind::kBackward:
      return "backward " + layer;
    case OpKind::kFree:
      return "free " + TensorName(op.tensor);
    case OpKind::kOptimizerStep:
      return "optimizer step";
    case OpKind::kOffload:
      return "offload " + TensorName(op.tensor);
    case OpKind::kPrefetch:
      return "prefetch " + TensorName(op.tensor);
  }
  return "?";
}

nlohmann::ordered_json internal::ScheduleJsonValue(const Schedule& schedule) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const Op& op : schedule.ops) {
    nlohmann::ordered_json j;
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kRecompute:
        j["op"] = op.kind == OpKind::kForward ? "forward" : "recompute";
        j["layer"] = op.layer;
        j["save"] = SaveName(op.save);
        if (op.save == SaveMode::kSelective) j["option"] = op.option;
        break;
      case OpKind::kBackward:
        j["op"] = "backward";
        j["layer"] = op.layer;
        break;
      case OpKind::kFree:
        j["op"] = "free";
        j["tensor"] = TensorName(op.tensor);
        break;
      case OpKind::kOptimizerStep:
        j["op"] = "optimizer_step";
        break;
      case OpKind::kOffload:
      case OpKind::kPrefetch:
        j["op"] = op.kind == OpKind::kOffload ? "offload" : "prefetch";
        j["tensor"] = TensorName(op.tensor);
        break;
    }
    arr.push_back(j);
  }
  return arr;
}

std::string ScheduleToJson(const Schedule& schedule) { return ScheduleJsonValue(schedule).dump(); }

Result<Schedule> ParseScheduleJson(std::string_view json_text, int num_layers,
                                   const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_array()) {
    return Status::Invalid(source + ": expected an array of schedule ops, got " +
                           DescribeJsonValue(doc));
  }
  Schedule s;
  s.num_layers = num_layers;
  const std::vector<std::string> kinds = {"forward",        "recompute", "backward", "free",
                                          "optimizer_step", "offload",   "prefetch"};
  for (size_t i = 0; i < doc.size(); ++i) {
    const std::string where = source + ": schedule[" + std::to_string(i) + "]";
    if (!doc[i].is_object()) {
      return Status::Invalid(where + ": expected an object, got " + DescribeJsonValue(doc[i]));
    }
    JsonObjectReader r(doc[i], where);
    std::string kind;
    REMAT_RETURN_IF_ERROR(r.Enum("op", &kind, kinds, true));
    Op op;
    if (kind == "free" || kind == "offload" || kind == "prefetch") {
      std::string name;
      REMAT_RETURN_IF_ERROR(r.String("tensor", &name, true));
      Result<TensorRef> t = ParseTensorName(name);
      if (!t.ok()) return t.status().WithPrefix(where);
      op = kind == "free" ? Op::Free(*t) : kind == "offload" ? Op::Offload(*t) : Op::Prefetch(*t);
    } else if (kind == "optimizer_step") {
      op = Op::OptimizerStep();
    } else {
      int64_t layer = 0;
      REMAT_RETURN_IF_ERROR(r.Int("layer", &layer, true, 0, std::max(0, num_layers - 1)));
      if (kind == "backward") {
        op = Op::Backward(static_cast<int>(layer));
      } else {
        std::string save;
        REMAT_RETURN_IF_ERROR(r.Enum("save", &save, {"none", "all", "selective"}, true));
        int64_t option = -1;
        SaveMode mode = save == "none"  ? SaveMode::kNone
                        : save == "all" ? SaveMode::kAll
                                        : SaveMode::kSelective;
        if (mode == SaveMode::kSelective) {
          REMAT_RETURN_IF_ERROR(r.Int("option", &option, true, 0, 1 << 20));
        }
        op = kind == "forward"
                 ? Op::Forward(static_cast<int>(layer), mode, static_cast<int>(option))
                 : Op::Recompute(static_cast<int>(layer), mode, static_cast<int>(option));
      }
    }
    s.ops.push_back(op);
  }
  return s;
}

}  // namespace remat
