// OpGraph: a model as a DAG of ops (Boost.Graph), with the tensors each op
// produces, consumes and saves for backward. Internal to the planner.
//
// Vertices are ops; an edge u -> v means v consumes a tensor u produced
// (residual connections are simply tensors with two consumers). Each op is
// tagged with the layer (chain group) it belongs to; chain.h derives the
// per-layer chain from the graph.
#ifndef REMAT_SRC_ANALYTIC_OP_GRAPH_H_
#define REMAT_SRC_ANALYTIC_OP_GRAPH_H_

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace remat {

struct TensorInfo {
  std::string name;
  int64_t bytes = 0;
  bool requires_grad = true;  // false for token ids, dropout masks
  int producer = -1;          // op index; -1 for graph inputs
};

struct OpInfo {
  std::string name;
  std::string layer;         // chain group ("embedding", "block3", "head", ...)
  std::vector<int> inputs;   // tensor ids
  std::vector<int> outputs;  // tensor ids (masks are outputs too)
  std::vector<int> saved;    // tensor ids kept for backward (inputs or outputs)
  double forward_flops = 0;
  double forward_bytes = 0;  // bytes read + written, for the roofline
  double backward_flops = 0;
  double backward_bytes = 0;
  // Transient bytes in backward besides the parameter gradients (e.g. a
  // dequantized weight, a fused kernel's accumulators).
  int64_t backward_workspace = 0;
  // The parameter gradients its backward computes, each a fresh tensor: of
  // the weights it trains and of a tied weight another op owns (an LM head).
  // Accumulated into an existing .grad, they are transients of this op;
  // where the backward creates the gradients, they become .grad and stay.
  int64_t gradient_elems = 0;
  int64_t gradient_bytes = 0;
  int64_t parameters = 0;       // parameters this op owns
  bool trainable = true;        // its parameters get gradients
  bool attention_core = false;  // recomputed by the selective option
  // Recomputed by the "mlp_activation" option: the MLP's activation (GELU;
  // SwiGLU's silu and product), recomputed from its kept inputs in backward.
  bool mlp_activation = false;
  // Recomputed by the "norm_output" option: a pre-norm (and its autocast
  // cast), its output made again from its kept input in the backward of the
  // projections that read it.
  bool norm_output = false;
  // Tensors earlier ops made that stay allocated through this op's forward
  // without being read by it: the C++ locals of a composite ATen function
  // (scaled_dot_product_attention's math path holds its fp32 copies of q, k
  // and v until it returns). Liveness only: no gradient flows through them.
  std::vector<int> held;
  // Bytes its forward allocates and frees before returning, besides its
  // outputs (the math path's softmax: a bool mask of the scores).
  int64_t forward_workspace = 0;
};

class OpGraph {
 public:
  int AddTensor(std::string name, int64_t bytes, bool requires_grad = true);
  // An op that records no autograd node (no input requires grad, no weight
  // trains) makes outputs that need no gradient.
  void ClearRequiresGrad(int t) { tensors_[t].requires_grad = false; }
  // Adds the op; sets the producer of its outputs and the graph edges.
  int AddOp(OpInfo op);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<OpInfo>& ops() const { return ops_; }
  // Adds to what op `op` holds through its forward and allocates within it
  // (OpInfo::held, forward_workspace): tensors made before it.
  void AddForwardLiveness(int op, const std::vector<int>& held, int64_t forward_workspace);
  // Ops that consume tensor `t`.
  const std::vector<int>& consumers(int t) const { return consumers_[t]; }

  // Op indices in a topological order (Boost). Fails only on a cycle,
  // which the builders never make.
  bool TopologicalOrder(std::vector<int>* order) const;

 private:
  struct EdgeProps {
    int tensor = -1;
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS,
                                      boost::no_property, EdgeProps>;
  Graph graph_;
  std::vector<TensorInfo> tensors_;
  std::vector<OpInfo> ops_;
  std::vector<std::vector<int>> consumers_;
};

}  // namespace remat

#endif  // REMAT_SRC_ANALYTIC_OP_GRAPH_H_
