#include "analytic/op_graph.h"

#include <boost/graph/topological_sort.hpp>
#include <iterator>

namespace remat::analytic {

int OpGraph::AddTensor(std::string name, int64_t bytes, bool requires_grad) {
  tensors_.push_back(TensorInfo{std::move(name), bytes, requires_grad, -1});
  consumers_.emplace_back();
  return static_cast<int>(tensors_.size()) - 1;
}

int OpGraph::AddOp(OpInfo op) {
  const int id = static_cast<int>(ops_.size());
  boost::add_vertex(graph_);
  for (int t : op.outputs) tensors_[t].producer = id;
  for (int t : op.inputs) {
    consumers_[t].push_back(id);
    if (tensors_[t].producer >= 0) {
      boost::add_edge(tensors_[t].producer, id, EdgeProps{t}, graph_);
    }
  }
  ops_.push_back(std::move(op));
  return id;
}

void OpGraph::AddForwardLiveness(int op, const std::vector<int>& held, int64_t forward_workspace) {
  ops_[op].held.insert(ops_[op].held.end(), held.begin(), held.end());
  ops_[op].forward_workspace += forward_workspace;
}

bool OpGraph::TopologicalOrder(std::vector<int>* order) const {
  std::vector<Graph::vertex_descriptor> reversed;
  try {
    boost::topological_sort(graph_, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    return false;
  }
  order->assign(reversed.rbegin(), reversed.rend());
  return true;
}

}  // namespace remat::analytic
