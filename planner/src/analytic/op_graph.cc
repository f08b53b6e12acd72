#include "analytic/op_graph.h"

namespace remat::analytic {

int OpGraph::AddTensor(std::string name, int64_t bytes, bool requires_grad) {
  tensors_.push_back(TensorInfo{std::move(name), bytes, requires_grad, -1});
  consumers_.emplace_back();
  return static_cast<int>(tensors_.size()) - 1;
}

int OpGraph::AddOp(OpInfo op) {
  const int id = static_cast<int>(ops_.size());
  for (int t : op.outputs) tensors_[t].producer = id;
  for (int t : op.inputs) consumers_[t].push_back(id);
  ops_.push_back(std::move(op));
  return id;
}

void OpGraph::Reserve(size_t tensors, size_t ops) {
  tensors_.reserve(tensors);
  consumers_.reserve(tensors);
  ops_.reserve(ops);
}

void OpGraph::AddForwardLiveness(int op, const std::vector<int>& held, int64_t forward_workspace) {
  ops_[op].held.insert(ops_[op].held.end(), held.begin(), held.end());
  ops_[op].forward_workspace += forward_workspace;
}

}  // namespace remat::analytic
