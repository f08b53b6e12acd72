// The chain's forward/backward dependency graph (see schedule.h).
#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <boost/graph/adjacency_list.hpp>

#include "remat/schedule/schedule.h"

namespace remat {
namespace {

struct Vertex {
  enum Kind { kBatch, kForward, kBackward } kind = kBatch;
  int layer = -1;
};
struct Edge {
  TensorRef tensor;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Vertex, Edge>;

void AddUnique(std::vector<TensorRef>* v, TensorRef t) {
  if (std::find(v->begin(), v->end(), t) == v->end()) v->push_back(t);
}

}  // namespace

ChainGraph::ChainGraph(int num_layers) : num_layers_(num_layers) {
  const int L = num_layers;
  Graph g;
  const auto batch = boost::add_vertex(Vertex{Vertex::kBatch, -1}, g);
  std::vector<Graph::vertex_descriptor> fwd(L), bwd(L);
  for (int i = 0; i < L; ++i) fwd[i] = boost::add_vertex(Vertex{Vertex::kForward, i}, g);
  for (int i = 0; i < L; ++i) bwd[i] = boost::add_vertex(Vertex{Vertex::kBackward, i}, g);
  auto producer_of_x = [&](int i) { return i == 0 ? batch : fwd[i - 1]; };
  for (int i = 0; i < L; ++i) {
    const TensorRef x_in{TensorKind::kX, i}, x_out{TensorKind::kX, i + 1}, a{TensorKind::kA, i};
    boost::add_edge(producer_of_x(i), fwd[i], Edge{x_in}, g);   // forward reads its input
    boost::add_edge(producer_of_x(i), bwd[i], Edge{x_in}, g);   // backward reads its input
    boost::add_edge(fwd[i], bwd[i], Edge{a}, g);                // ... and what it saved
    // Not its output: autograd starts a layer's backward from the output's
    // place in the graph. A layer whose own backward needs its output (one
    // ending in a softmax) holds it through its graph; remat's layers do
    // not, and remat.profile counts such a hold in the backward's
    // workspace. The loss's backward reads its scalar output, where the
    // gradient starts.
    if (i == L - 1) boost::add_edge(fwd[i], bwd[i], Edge{x_out}, g);
    if (i + 1 < L) {
      // The residual stream: backward i+1 produces g[i+1] for backward i.
      boost::add_edge(bwd[i + 1], bwd[i], Edge{TensorRef{TensorKind::kG, i + 1}}, g);
    }
  }
  forward_reads_.resize(L);
  forward_writes_.resize(L);
  backward_reads_.resize(L);
  backward_writes_.resize(L);
  for (auto [vi, vend] = boost::vertices(g); vi != vend; ++vi) {
    const Vertex& v = g[*vi];
    if (v.kind == Vertex::kBatch) continue;
    auto& reads = v.kind == Vertex::kForward ? forward_reads_[v.layer] : backward_reads_[v.layer];
    auto& writes = v.kind == Vertex::kForward ? forward_writes_[v.layer] : backward_writes_[v.layer];
    for (auto [ei, eend] = boost::in_edges(*vi, g); ei != eend; ++ei) AddUnique(&reads, g[*ei].tensor);
    for (auto [ei, eend] = boost::out_edges(*vi, g); ei != eend; ++ei) AddUnique(&writes, g[*ei].tensor);
  }
  // The last forward's output x[L] has no forward consumer but backward L-1 reads it.
  if (L > 0) AddUnique(&forward_writes_[L - 1], TensorRef{TensorKind::kX, L});
  // A forward without grad keeps nothing for backward: it writes only its output.
  forward_nograd_writes_ = forward_writes_;
  for (auto& w : forward_nograd_writes_) {
    w.erase(std::remove_if(w.begin(), w.end(),
                           [](const TensorRef& t) { return t.kind == TensorKind::kA; }),
            w.end());
  }
}

const ChainGraph& ChainGraph::For(int num_layers) {
  thread_local std::map<int, std::unique_ptr<ChainGraph>> cache;
  std::unique_ptr<ChainGraph>& g = cache[num_layers];
  if (!g) g = std::make_unique<ChainGraph>(num_layers);
  return *g;
}

const std::vector<TensorRef>& ChainGraph::Reads(const Op& op) const {
  if (op.layer < 0 || op.layer >= num_layers_) return none_;
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kRecompute:
      return forward_reads_[op.layer];
    case OpKind::kBackward:
      return backward_reads_[op.layer];
    default:
      return none_;
  }
}

const std::vector<TensorRef>& ChainGraph::Writes(const Op& op) const {
  if (op.layer < 0 || op.layer >= num_layers_) return none_;
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kRecompute:
      return op.save == SaveMode::kNone ? forward_nograd_writes_[op.layer]
                                        : forward_writes_[op.layer];
    case OpKind::kBackward:
      return backward_writes_[op.layer];
    default:
      return none_;
  }
}

}  // namespace remat
