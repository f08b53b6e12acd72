// The recomputes of a selective layer's backward, run together when the
// backward starts, in the order the forward ran their parts: PyTorch's
// selective checkpoint replays a block's forward at the first saved tensor
// the block's backward unpacks, so what the recomputes make is live from
// the backward's start. Each recompute leaves its result in a stash, which
// the function that dropped it takes in its own backward (the attention
// core's, Backward in layer_execution.cc); a function whose stash is empty
// recomputes there instead.
#ifndef REMAT_RUNTIME_SRC_BACKWARD_REPLAY_H_
#define REMAT_RUNTIME_SRC_BACKWARD_REPLAY_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace remat::runtime {

class BackwardReplay {
 public:
  // A stash for one recompute's result, owned by the replay: it lives as
  // long as the replay does, and its taker moves the tensors out of it.
  template <class T>
  T* NewStash() {
    auto stash = std::make_shared<T>();
    T* raw = stash.get();
    stashes_.push_back(std::move(stash));
    return raw;
  }

  // Queues a recompute; the forward calls this in its order.
  void Add(std::function<void()> recompute) { pending_.push_back(std::move(recompute)); }

  // Runs the queued recomputes in order, then drops them (and what they
  // captured).
  void Run() {
    std::vector<std::function<void()>> pending = std::move(pending_);
    pending_.clear();
    for (auto& recompute : pending) recompute();
  }

 private:
  std::vector<std::function<void()>> pending_;
  std::vector<std::shared_ptr<void>> stashes_;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_BACKWARD_REPLAY_H_
