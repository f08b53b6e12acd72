// Turns interval choices (interval_bounds.h's IntervalChoice) into the
// compute ops of a schedule; AddFrees (schedule.h) then inserts the frees.
#ifndef REMAT_SRC_SOLVER_OP_EMITTER_H_
#define REMAT_SRC_SOLVER_OP_EMITTER_H_

#include <cstdint>
#include <vector>

#include "remat/schedule/schedule.h"
#include "solver/chain_terms.h"
#include "solver/interval_bounds.h"

namespace remat::solver {

// Appends ops, using kForward for a layer's first forward and kRecompute
// afterwards.
class OpEmitter {
 public:
  explicit OpEmitter(int num_layers) : forwarded_(num_layers, 0) {}
  void ForwardWithGrad(int layer, const KeepMode& mode);
  // No-grad forwards of layers [begin, end).
  void Sweep(int begin, int end);
  void Backward(int layer) { ops_.push_back(Op::Backward(layer)); }
  // The ops so far plus the optimizer step.
  std::vector<Op> Finish();

 private:
  Op Forward(int layer, SaveMode save, int option);

  std::vector<char> forwarded_;
  std::vector<Op> ops_;
};

// Emits interval (s, t) given `slots` left for it: `choose(s, t, slots)`
// returns the IntervalChoice to apply; sub-intervals get the slots the
// choice leaves them (chain_terms.h). Recursion depth <= 2 * (t - s).
template <typename ChooseFn>
void EmitInterval(const ChainTerms& terms, int s, int t, int64_t slots, const ChooseFn& choose,
                  OpEmitter* out) {
  const IntervalChoice c = choose(s, t, slots);
  if (c.split == 0) {
    out->ForwardWithGrad(s, terms.mode(s, c.mode));
    if (t > s + 1) EmitInterval(terms, s + 1, t, slots - terms.keep(s, c.mode), choose, out);
    out->Backward(s);
  } else {
    out->Sweep(s, c.split);
    EmitInterval(terms, c.split, t, slots - terms.x(s), choose, out);
    EmitInterval(terms, s, c.split, slots, choose, out);
  }
}

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_OP_EMITTER_H_
