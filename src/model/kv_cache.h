// KvCache: the keys and values generation keeps per layer so each new token attends to the past
// without recomputing it. For every layer of a Stage: K and V of this rank's kv heads (K/tp under
// tensor parallelism), (capacity, K/tp, D) each, allocated once up front (tag kKvCache) for the
// prompt plus every token to be generated.
// Invariant: rows [0, length()) of every layer hold the keys (after RoPE at their absolute
// positions) and values of the tokens seen so far; a step writes rows [length(), length() + n) of
// every layer, then Advance(n) publishes them, so the next step's RoPE positions start at
// length().
#pragma once

#include <cstdint>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"

namespace pentamesh::model {

class KvCache {
 public:
  // layers: the blocks of the Stage; capacity: the most tokens the cache will hold.
  KvCache(core::Allocator& alloc, int64_t layers, int64_t capacity, int64_t kv_heads_local,
          int64_t head_dim);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t layers() const { return static_cast<int64_t>(k_.size()); }
  // Layer `layer`'s whole cache, (capacity, K/tp, D).
  core::Tensor k(int64_t layer) const { return k_.at(static_cast<size_t>(layer)).view(); }
  core::Tensor v(int64_t layer) const { return v_.at(static_cast<size_t>(layer)).view(); }
  // REQUIRES: length() + n <= capacity(). Every layer has written rows [length(), length() + n).
  void Advance(int64_t n);
  // Bytes held (K and V of every layer), as the allocator counts them under kKvCache.
  int64_t bytes() const;

 private:
  std::vector<core::Buffer> k_, v_;
  int64_t capacity_ = 0, length_ = 0;
};

}  // namespace pentamesh::model
