#include "solver/op_emitter.h"

namespace remat::solver {

Op OpEmitter::Forward(int layer, SaveMode save, int option) {
  const bool first = !forwarded_[layer];
  forwarded_[layer] = 1;
  return first ? Op::Forward(layer, save, option) : Op::Recompute(layer, save, option);
}

void OpEmitter::ForwardWithGrad(int layer, const KeepMode& mode) {
  ops_.push_back(Forward(layer, mode.save, mode.option));
}

void OpEmitter::Sweep(int begin, int end) {
  for (int j = begin; j < end; ++j) ops_.push_back(Forward(j, SaveMode::kNone, -1));
}

std::vector<Op> OpEmitter::Finish() {
  ops_.push_back(Op::OptimizerStep());
  return std::move(ops_);
}

}  // namespace remat::solver
