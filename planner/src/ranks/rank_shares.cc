// The share of the model each tensor- and pipeline-parallel rank holds, and
// the distinct ranks of a job with their model state (remat/ranks/rank_memory.h).
#include <algorithm>
#include <map>

#include "analytic/parts.h"
#include "analytic/transformer_graph.h"
#include "remat/analytic/analytic.h"
#include "remat/model/precision.h"
#include "remat/ranks/pipeline.h"
#include "remat/ranks/rank_memory.h"

namespace remat {

// What the ranks read of the model's op graph (BuildTransformerGraph of the
// model, unsplit).
struct RankLayout {
  struct Op {  // an op holding parameters
    std::string layer;
    int64_t parameters = 0;
    bool trainable = false;
    bool operator==(const Op& o) const {
      return layer == o.layer && parameters == o.parameters && trainable == o.trainable;
    }
  };
  std::vector<Op> ops;  // in the graph's order
  std::vector<std::pair<std::string, std::string>> kinds;  // layer tag -> kind, in chain order
  int64_t largest_trained = 0;  // the elements of the largest trained tensor
  int64_t parameters = 0, trainable_parameters = 0;
};

namespace {

std::shared_ptr<const RankLayout> LayoutOf(const analytic::TransformerGraph& tg) {
  auto layout = std::make_shared<RankLayout>();
  for (const analytic::OpInfo& op : tg.graph.ops()) {
    if (op.parameters != 0) layout->ops.push_back({op.layer, op.parameters, op.trainable});
  }
  layout->kinds = tg.kinds;
  for (const analytic::TrainedTensor& t : tg.trained_tensors) {
    layout->largest_trained = std::max(layout->largest_trained, t.elements);
  }
  layout->parameters = tg.parameters;
  layout->trainable_parameters = tg.trainable_parameters;
  return layout;
}

// The pipeline stage (rank) running chain chunk `chunk` of `chunks`: chunks
// are dealt round robin over the stages (interleaved: rank s runs chunks s,
// s + p, s + 2p, ...).
int64_t StageOfChunk(int64_t chunk, const Parallelism& p) { return chunk % p.pipeline; }

// The chunk holding block `b` of `blocks` split in `chunks`.
int64_t ChunkOfBlock(int64_t b, int64_t blocks, int64_t chunks) {
  for (int64_t c = 0; c < chunks; ++c) {
    if (b < PipelineBlocks(blocks, chunks, c).end) return c;
  }
  return chunks - 1;
}

double Ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

int64_t Scaled(int64_t bytes, double ratio) {
  return static_cast<int64_t>(static_cast<double>(bytes) * ratio + 0.5);
}

// RankShares of the model whose layout (its graph's summary) is `tg`.
std::vector<RankShare> SharesOf(const ModelConfig& config, const Parallelism& p,
                                const RankLayout& tg) {
  const ModelConfig c = WithDefaults(config);
  const int64_t chunks = p.pipeline * p.virtual_stages;
  std::vector<RankShare> shares(p.pipeline);
  for (int64_t s = 0; s < p.pipeline; ++s) shares[s].stage = s;
  // Each chain layer's stage, in chain order (tg.kinds lists the layers so).
  std::map<std::string, int64_t> stage_of;
  int64_t block = 0;
  bool past_blocks = false;
  for (const auto& [layer, kind] : tg.kinds) {
    int64_t chunk = 0;
    if (kind == kBlockKind) {
      chunk = ChunkOfBlock(block++, c.layers, chunks);
      past_blocks = true;
    } else if (past_blocks) {
      chunk = chunks - 1;
    }
    const int64_t stage = StageOfChunk(chunk, p);
    stage_of[layer] = stage;
    shares[stage].layers.push_back(layer);
    shares[stage].layer_chunks.push_back(chunk / p.pipeline);
  }
  // Parameters per layer as the tensor-parallel rank holds them.
  std::map<std::string, int64_t> held, trained, persistent;
  for (const RankLayout::Op& op : tg.ops) {
    const bool replicated = op.parameters <= 2 * c.hidden;
    const int64_t n = replicated ? op.parameters : (op.parameters + p.tensor - 1) / p.tensor;
    held[op.layer] += n;
    if (op.trainable) trained[op.layer] += n;
    if (n <= p.persistence_threshold) persistent[op.layer] += n;
  }
  for (const auto& [held_layer, n] : held) {
    const std::string& layer = held_layer;  // a lambda below reads it (C++17: no binding captures)
    const auto it = stage_of.find(layer);
    RankShare& s = shares[it == stage_of.end() ? 0 : it->second];
    s.parameters += n;
    s.trainable += trained[layer];
    s.persistent_parameters += persistent[layer];
    const bool is_block = std::find_if(tg.kinds.begin(), tg.kinds.end(), [&](const auto& k) {
                            return k.first == layer && k.second == kBlockKind;
                          }) != tg.kinds.end();
    if (is_block) {
      if (n > s.block_parameters) {
        s.block_parameters = n;
        s.block_trainable = trained[layer];
        s.block_persistent = persistent[layer];
      }
    } else {
      s.root_parameters += n;
      s.root_persistent += persistent[layer];
    }
  }
  // A tied head reads the embedding's weight: the last stage holds a copy.
  if (p.pipeline > 1 && analytic::TiedHead(c)) {
    const int64_t tied = (c.vocab * c.hidden + p.tensor - 1) / p.tensor;
    RankShare& last = shares.back();
    last.parameters += tied;
    last.root_parameters += tied;
    if (tied <= p.persistence_threshold) {
      last.persistent_parameters += tied;
      last.root_persistent += tied;
    }
    if (trained["embedding"] > 0) last.trainable += tied;
  }
  return shares;
}

}  // namespace

Result<std::vector<RankShare>> RankShares(const ModelConfig& config, const Parallelism& p) {
  REMAT_RETURN_IF_ERROR(ValidateParallelism(p, config, config.name));
  REMAT_ASSIGN_OR_RETURN(const analytic::TransformerGraph tg,
                         analytic::BuildTransformerGraph(config));
  return SharesOf(config, p, *LayoutOf(tg));
}

Result<std::shared_ptr<const RankLayout>> BuildRankLayout(const ModelConfig& config) {
  REMAT_ASSIGN_OR_RETURN(const analytic::TransformerGraph tg,
                         analytic::BuildTransformerGraph(config));
  return LayoutOf(tg);
}

std::shared_ptr<const RankLayout> RankLayoutOfChain(const AnalyticChain& chain) {
  return LayoutOf(GraphOfChain(chain));
}

bool SameLayout(const RankLayout& a, const RankLayout& b) {
  return a.ops == b.ops && a.kinds == b.kinds && a.largest_trained == b.largest_trained &&
         a.parameters == b.parameters && a.trainable_parameters == b.trainable_parameters;
}

int64_t TrainableParameters(const RankLayout& layout) { return layout.trainable_parameters; }

Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config, const Profile& whole,
                                             const Parallelism& p) {
  REMAT_RETURN_IF_ERROR(ValidateParallelism(p, config, config.name));
  REMAT_ASSIGN_OR_RETURN(std::shared_ptr<const RankLayout> layout, BuildRankLayout(config));
  return RankMemories(config, whole, p, *layout);
}

namespace {

// RankMemories of `whole`; `shared`, where given, is `whole`, and the ranks
// that hold every layer as it is share it as their stage profile.
Result<std::vector<RankMemory>> RankMemoriesOf(const ModelConfig& config, const Profile& whole,
                                               const std::shared_ptr<const Profile>& shared,
                                               const Parallelism& p, const RankLayout& layout) {
  // One graph of the model for the shares and both parameter counts
  // (ParameterCount and TrainableParameterCount build the same one).
  REMAT_RETURN_IF_ERROR(ValidateParallelism(p, config, config.name));
  const RankLayout& tg = layout;
  const std::vector<RankShare> shares = SharesOf(config, p, tg);
  const int64_t all = tg.parameters, all_trained = tg.trainable_parameters;
  // Bytes per parameter of the job's model state (buffers ride with the
  // weights) and of its fp32 master weights.
  const ReplicaState model = ReplicaOfProfile(whole);
  const int master_per = ConventionOf(config.precision).master_weight_bytes;
  // The largest trained tensor (ZeRO-Offload's staging buffers), as a
  // tensor-parallel rank holds it.
  int64_t largest = 0;
  if (p.offload == StateOffload::kOptimizer) {
    largest = (tg.largest_trained + p.tensor - 1) / p.tensor;
  }
  const int64_t per_rank = p.data_ranks() * p.tensor;
  std::vector<RankMemory> out;
  for (const RankShare& share : shares) {
    const double held = Ratio(share.parameters, all), trained = Ratio(share.trainable, all_trained);
    ReplicaState r;
    r.weight_bytes = Scaled(model.weight_bytes, held);
    r.gradient_bytes = Scaled(model.gradient_bytes, trained);
    r.optimizer_bytes = Scaled(model.optimizer_bytes, trained);
    r.master_weight_bytes = config.optimizer == Optimizer::kNone ? 0 : share.trainable * master_per;
    r.block_weight_bytes = Scaled(model.weight_bytes, Ratio(share.block_parameters, all));
    r.block_gradient_bytes =
        Scaled(model.gradient_bytes, Ratio(share.block_trainable, all_trained));
    r.root_weight_bytes = Scaled(model.weight_bytes, Ratio(share.root_parameters, all));
    r.gradient_element_bytes = ConventionOf(config.precision).grad_bytes;
    r.persistent_weight_bytes = Scaled(model.weight_bytes, Ratio(share.persistent_parameters, all));
    r.block_persistent_weight_bytes = Scaled(model.weight_bytes, Ratio(share.block_persistent, all));
    r.root_persistent_weight_bytes = Scaled(model.weight_bytes, Ratio(share.root_persistent, all));
    r.micro_batches = std::max<int64_t>(whole.grad_accumulation, 1);
    r.trained_weight_bytes = share.trainable * ConventionOf(config.precision).weight_bytes;
    r.largest_trained_weight_bytes = largest * ConventionOf(config.precision).weight_bytes;
    RankMemory m;
    m.stage = share.stage;
    m.rank = share.stage * per_rank;
    m.ranks = per_rank;
    m.state = ShardModelState(r, p);
    if (shared != nullptr && p.pipeline == 1 && p.tensor == 1) {
      m.profile = RankProfile(whole, m.state);
      m.replica = r;
      m.stage_profile = shared;
      m.parallel = p;
      out.push_back(std::move(m));
      continue;
    }
    Profile stage = whole;
    if (p.pipeline > 1) {
      // The micro-batches each of the rank's chunks holds in flight.
      Result<std::vector<int64_t>> in_flight =
          InFlightMicrobatches(p, share.stage, r.micro_batches);
      if (!in_flight.ok()) {
        return in_flight.status().WithPrefix("--grad-accumulation " +
                                             std::to_string(r.micro_batches));
      }
      m.in_flight = *in_flight;
      stage.layers.clear();
      for (const LayerProfile& l : whole.layers) {
        const auto at = std::find(share.layers.begin(), share.layers.end(), l.name);
        if (at == share.layers.end()) continue;
        stage.layers.push_back(l);
        const int64_t chunk = share.layer_chunks[at - share.layers.begin()];
        stage.layers.back().in_flight_microbatches = m.in_flight[chunk];
      }
    }
    // Each layer's gradients as a tensor-parallel rank holds them.
    if (p.tensor > 1) {
      for (LayerProfile& l : stage.layers) {
        l.gradient_bytes = Scaled(l.gradient_bytes, 1.0 / static_cast<double>(p.tensor));
      }
    }
    m.profile = RankProfile(stage, m.state);
    m.replica = r;
    m.stage_profile = std::make_shared<const Profile>(std::move(stage));
    m.parallel = p;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config, const Profile& whole,
                                             const Parallelism& p, const RankLayout& layout) {
  return RankMemoriesOf(config, whole, nullptr, p, layout);
}

Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config,
                                             const std::shared_ptr<const Profile>& whole,
                                             const Parallelism& p, const RankLayout* layout) {
  if (layout != nullptr) return RankMemoriesOf(config, *whole, whole, p, *layout);
  REMAT_RETURN_IF_ERROR(ValidateParallelism(p, config, config.name));
  REMAT_ASSIGN_OR_RETURN(std::shared_ptr<const RankLayout> built, BuildRankLayout(config));
  return RankMemoriesOf(config, *whole, whole, p, *built);
}

RankMemory ProfileRankMemory(const Profile& whole, const Parallelism& p) {
  RankMemory m;
  m.ranks = p.gpus;
  m.replica = ReplicaOfProfile(whole);
  m.replica.micro_batches = std::max<int64_t>(whole.grad_accumulation, 1);
  m.state = ShardModelState(m.replica, p);
  m.profile = RankProfile(whole, m.state);
  m.stage_profile = std::make_shared<const Profile>(whole);
  m.parallel = p;
  return m;
}

}  // namespace remat
