// ParamSet: every parameter of this rank's model chunks, enumerated once, by name, in flat buffers:
// weights (compute dtype: f32, or bf16 in mixed precision), fp32 grads, and, unless a sharded
// optimizer keeps them (ParamLayout::optimizer_state), fp32 Adam m and v and in bf16 mode the fp32
// master weights. Each parameter records its GLOBAL shape, the dim it is sharded
// on, the mesh axis and this rank's shard, its init rule and whether weight decay applies.
// Invariants:
//  - Init is layout independent: element e of a parameter gets
//    init.std * CounterRng::Normal(seed, HashName(name), global_flat_index(e)), so every mesh and
//    every shard starts from the same global weights.
//  - Parameters are identified by name, never by position; ids follow registration order and
//    every consumer walks them in that order. ForEach visits (info, master, grad, m, v) when this
//    set holds the Adam state (ZeRO 0: train/optimizer.cc, ckpt/ snapshot/restore and HF import,
//    tests/golden); Init and a sharded ZeroOptimizer walk info(id) over their ranges.
//  - Grads accumulate (+=) across micro-batches until ZeroGrads().
//  - Units: the model marks each layer's parameters as one unit (BeginUnit). With
//    ParamLayout::unit_pad every unit's flat range is padded to pad_multiple, so ZeRO-2/3 can
//    reduce-scatter one layer's gradients at a time (train/zero_optimizer.h). With
//    ParamLayout::sharded_grads there is no full gradient buffer: grad(id) is valid only while its
//    unit's gradient buffer is bound (BindUnitGrads), which the ZeRO-2 hooks do around each
//    layer's backward.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"

namespace pentamesh::comm {
class Communicator;
}

namespace pentamesh::model {

using core::ConstTensor;
using core::Tensor;

enum class MeshAxis : uint8_t { kNone, kTp, kEp };
const char* ToString(MeshAxis axis);

// This rank's coordinates on the axes a layer can be sharded over (1/0 on one process).
// tp_comm: the tp group (size tp_size) the layers' regions communicate over (model/regions.h);
// null means "one process": Stage then supplies a one-rank group.
// sequence_parallel: Megatron SP (model/regions.h, TpBlockEnds): the residual stream, norms and
// the embedding output hold this rank's T/tp rows; meaningful with tp_size > 1 only.
struct ShardConfig {
  int64_t tp_size = 1, tp_rank = 0;
  int64_t ep_size = 1, ep_rank = 0;
  comm::Communicator* tp_comm = nullptr;
  bool sequence_parallel = false;
};

// How a parameter is split: dim `dim` of the global shape is cut into `size` equal slices
// (size = the axis size) and this rank holds slice `rank`. dim = -1: replicated.
struct Sharding {
  int dim = -1;
  MeshAxis axis = MeshAxis::kNone;
  int64_t size = 1, rank = 0;
};

enum class InitKind : uint8_t { kNormal, kOnes, kZeros };
struct InitRule {
  InitKind kind = InitKind::kNormal;
  double std = 0.02;
};

struct ParamInfo {
  std::string name;
  core::Shape global_shape;
  core::Shape local_shape;
  Sharding sharding;
  InitRule init;
  bool weight_decay = true;  // false for norms and biases
  int64_t offset = 0;        // element offset of the local shard in the flat buffers
  int64_t numel() const { return local_shape.numel(); }
};

using ParamId = int32_t;

// How Finalize lays out the flat buffers. pad_multiple: the flat length is rounded up to a
// multiple of it (ZeRO shards the flat buffers over dp ranks; padding elements stay zero and belong
// to no parameter). optimizer_state = false: no Adam m/v (and no bf16 master) here, because a
// sharded optimizer (train/zero_optimizer.h) keeps only its own range of them.
// unit_pad: pad every unit (not only the whole) to pad_multiple. sharded_grads: no full fp32 grad
// buffer (ZeRO-2): grads exist only per bound unit. sharded_weights (ZeRO-3): the weights buffer
// holds only this rank's slice of every unit, concatenated in unit order (without an expert
// group: slice shard_rank of pad_multiple of the unit); a unit's full weights exist only while
// bound (BindUnitWeights). expert_pad_multiple > 0 (ZeRO-3 with
// expert parallel): a unit's routed-expert params (IsRoutedExpert) are packed and sliced over
// expert_pad_multiple ranks (this rank: expert_shard_rank), apart from its other params, which
// are packed and sliced over pad_multiple (PlanShards).
struct ParamLayout {
  int64_t pad_multiple = 1;
  bool optimizer_state = true;
  bool unit_pad = false;
  bool sharded_grads = false;
  bool sharded_weights = false;
  int64_t shard_rank = 0;
  int64_t expert_pad_multiple = 0;
  int64_t expert_shard_rank = 0;
};

// A unit's parameters [first, last) and its range [offset, offset + numel_padded) of the flat
// buffers.
struct ParamUnit {
  int32_t first = 0, last = 0;
  int64_t offset = 0, numel_padded = 0;
};

// A routed expert's parameter: sharded over ep (size > 1). With ep > 1 its grads reduce over the
// expert-data-parallel group, not over dp x cp (docs/zero-ep.md).
bool IsRoutedExpert(const ParamInfo& p);

// Sharding of the flat buffers over a data-parallel group pair (ZeRO, docs/zero-ep.md): the
// params of one kind (dense, or routed-expert when the expert group has size > 0) of one unit
// (per_unit) or of the whole buffer form a ShardGroup, packed in flat order (`runs`) and padded
// to a multiple of the group size (`padded`); rank r of the group owns packed elements
// [r * shard, (r + 1) * shard), stored at [local, local + shard) of this rank's slice buffers
// (the groups' shards concatenated in order: unit by unit, dense before expert). Empty groups
// are dropped. Example: one unit of 6 dense and 4 expert elements, dense group of 4 ranks (rank
// 1), expert group of 2 (rank 0): dense padded 8, shard 2, local 0, owns flat [2, 4); expert
// padded 4, shard 2, local 2, owns flat [6, 8) (its first packed elements).
struct GroupShape {
  int64_t size = 1, rank = 0;
};
struct ShardGroup {
  bool expert = false;
  int32_t unit = -1;                              // -1: the whole buffer
  std::vector<std::pair<int64_t, int64_t>> runs;  // flat [begin, end), ascending
  int64_t numel = 0, padded = 0, shard = 0, local = 0;
  int64_t rank = 0;  // this rank in the group
};
// A piece of this rank's slice: flat elements [flat_begin, flat_begin + n) are elements
// [local, local + n) of the slice buffers.
struct ShardPiece {
  int64_t flat_begin = 0, n = 0, local = 0;
};
struct ShardPlan {
  std::vector<ShardGroup> groups;
  std::vector<ShardPiece> pieces;  // ascending flat_begin; padding belongs to none
  int64_t numel = 0;               // length of the slice buffers (the groups' shards)
};
class ParamSet;
// REQUIRES: params finalized (offsets known). expert.size == 0: every param is dense.
ShardPlan PlanShards(const ParamSet& params, bool per_unit, GroupShape dense, GroupShape expert);

// Around each layer a Stage calls Acquire before the layer runs and Release after it, for the
// units the layer reads (forward) or reads and accumulates grads into (backward). ZeRO-2/3
// implement it (train/zero_optimizer.h); pairs nest per unit (a tied embedding is acquired by the
// head and by the embedding). A split backward (zero-bubble B then W) ends a layer's B with
// Park instead of Release(kBackward): the unit's grads stay bound to the micro-batch (W's deferred
// GEMMs accumulate into them) until FinishWeightGrads after that micro-batch's W, which does what
// Release(kBackward) would have done with them (W reads no weights, so nothing is gathered).
enum class Pass : uint8_t { kForward, kBackward };
class ParamHooks {
 public:
  virtual ~ParamHooks() = default;
  virtual void Acquire(int32_t unit, Pass pass) = 0;
  virtual void Release(int32_t unit, Pass pass) = 0;
  virtual void Park(int32_t unit, int64_t mb_id) = 0;
  virtual void FinishWeightGrads(int32_t unit, int64_t mb_id) = 0;
};

class ParamSet {
 public:
  // weight_dtype: kF32 (fp32 training) or kBF16 (mixed precision with fp32 master weights).
  ParamSet(core::Allocator& alloc, core::Dtype weight_dtype);
  ParamSet(const ParamSet&) = delete;
  ParamSet& operator=(const ParamSet&) = delete;

  // Registers a parameter; REQUIRES: !finalized(), unique name, sharded dim divisible by size.
  ParamId Add(const std::string& name, core::Shape global_shape, Sharding sharding, InitRule init,
              bool weight_decay);
  // Starts a new unit: the parameters added from now on belong to it (parameters added before
  // the first call form unit 0). Returns the unit's index.
  int32_t BeginUnit();
  // Allocates the flat buffers (weights, grads, m, v, master). After this no Add.
  void Finalize(const ParamLayout& layout = {});
  bool finalized() const { return finalized_; }

  // Initialises every weight from the counter RNG (layout independent), zeroes grads and state.
  void Init(uint64_t seed);
  // The initial fp32 values of flat elements [begin, begin + n) (0 for padding) under `seed`.
  void InitValues(uint64_t seed, int64_t begin, int64_t n, float* out) const;
  uint64_t init_seed() const { return seed_; }

  // Compute-dtype weight (f32 or bf16) with the local shape (ZeRO-3: while its unit is bound).
  ConstTensor weight(ParamId id) const;
  // fp32 gradient with the local shape (accumulated with +=).
  Tensor grad(ParamId id) const;
  // fp32 master weight: the weight itself in fp32 mode, the separate master copy in bf16 mode.
  // REQUIRES: optimizer_state or fp32 (a sharded optimizer keeps the bf16 masters itself).
  Tensor master(ParamId id) const;

  const ParamInfo& info(ParamId id) const { return infos_.at(static_cast<size_t>(id)); }
  ParamId Find(const std::string& name) const;  // -1 when absent
  int32_t size() const { return static_cast<int32_t>(infos_.size()); }
  int64_t numel() const { return numel_; }
  // Length of the flat buffers: numel() rounded up to layout.pad_multiple.
  int64_t numel_padded() const { return numel_padded_; }
  bool has_optimizer_state() const { return layout_.optimizer_state; }
  // The whole flat buffers (numel_padded() elements), for ZeRO and bucketed reductions.
  Tensor flat_grads() const;
  Tensor flat_master() const;  // fp32 master weights (the weights themselves in fp32 mode)
  core::Dtype weight_dtype() const { return weight_dtype_; }
  // The compute-dtype flat weights (numel_padded() elements).
  Tensor flat_weights() const;
  const ParamLayout& layout() const { return layout_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  int32_t unit_of(ParamId id) const;
  // sharded_grads layouts: grad(id) of the unit's parameters points into `grads` (the unit's
  // numel_padded fp32 elements) until UnbindUnitGrads.
  void BindUnitGrads(int32_t unit, float* grads);
  void UnbindUnitGrads(int32_t unit);
  // sharded_weights layouts: this rank's slice of a unit's weights (numel_padded / pad_multiple
  // elements in the compute dtype), and binding of the unit's gathered full weights.
  Tensor unit_weight_shard(int32_t unit) const;
  // sharded_weights layouts: this rank's whole slice (every unit's, PlanShards' local order).
  Tensor weight_slice() const;
  void BindUnitWeights(int32_t unit, void* weights);
  void UnbindUnitWeights(int32_t unit);

  void ZeroGrads();
  // Visits every parameter with (info, master fp32, grad, adam m, adam v).
  using Visitor =
      std::function<void(const ParamInfo&, Tensor master, Tensor grad, Tensor m, Tensor v)>;
  void ForEach(const Visitor& fn);
  // In bf16 mode rounds the master weights into the bf16 compute weights (after an update or a
  // load); a no-op in fp32 mode.
  void SyncWeightsFromMaster();

 private:
  Tensor Slice(const core::Buffer& buf, core::Dtype dtype, ParamId id) const;
  core::Allocator& alloc_;
  core::Dtype weight_dtype_;
  std::vector<ParamInfo> infos_;
  std::unordered_map<std::string, ParamId> by_name_;
  int64_t numel_ = 0, numel_padded_ = 0;
  uint64_t seed_ = 0;
  ParamLayout layout_;
  std::vector<int32_t> unit_starts_{0};  // first ParamId of each unit
  std::vector<ParamUnit> units_;
  std::vector<int32_t> unit_of_;
  std::vector<float*> unit_grads_;          // sharded_grads: bound grad buffer per unit (or null)
  std::vector<void*> unit_weights_;         // sharded_weights: bound gathered weights per unit
  std::vector<int64_t> unit_shard_offset_;  // sharded_weights: the unit's slice in weights_
  std::vector<int64_t> unit_shard_numel_;   // sharded_weights: the unit's slice length
  std::vector<ShardPiece> weight_pieces_;   // sharded_weights: the flat pieces of the slice
  bool finalized_ = false;
  core::Buffer weights_, grads_, adam_m_, adam_v_, master_;
};

// Flat index in the GLOBAL tensor of local element `local_index` of a shard.
int64_t GlobalIndex(const ParamInfo& info, int64_t local_index);

}  // namespace pentamesh::model
