// Token embedding, vocab-parallel: this rank holds rows [tp_rank * V/tp, (tp_rank+1) * V/tp) of the
// (V, H) table. Rows outside the shard give zeros and reduce_from_tp sums the shards over
// shard.tp_comm (model/regions.h); on one process the shard is the whole table. Backward needs no
// communication: dy is replicated over tp. Sequence parallel: the sum is a reduce-scatter, y
// holds this rank's T/tp rows, and backward all-gathers dy (scatter_seq_tp's conjugate).
// No stash: backward needs only the token ids, which the stage keeps.
#pragma once

#include <string>

#include "model/layer_common.h"
#include "model/param_set.h"
#include "model/regions.h"

namespace pentamesh::model {

class Embedding {
 public:
  Embedding(ParamSet& params, const std::string& name, int64_t vocab, int64_t hidden,
            const ShardConfig& shard);
  // y (T, H) = table[tokens] (this rank's T/tp rows under SP); tokens (T) i32 in [0, V).
  void Forward(Tensor y, ConstTensor tokens, const LayerContext& ctx) const;
  // dtable[tokens[t]] += dy[t]; dy has y's rows.
  void Backward(ConstTensor dy, ConstTensor tokens, const LayerContext& ctx) const;
  ParamId weight() const { return weight_; }

 private:
  ParamSet& params_;
  TpBlockEnds ends_;
  ParamId weight_;
  int64_t vocab_, vocab_local_ = 0, vocab_begin_ = 0, hidden_;
};

}  // namespace pentamesh::model
