#include "model/kv_cache.h"

#include "core/check.h"

namespace pentamesh::model {

KvCache::KvCache(core::Allocator& alloc, int64_t layers, int64_t capacity, int64_t kv_heads_local,
                 int64_t head_dim)
    : capacity_(capacity) {
  PM_CHECK(layers >= 0 && capacity > 0 && kv_heads_local > 0 && head_dim > 0)
      << "layers=" << layers << " capacity=" << capacity << " kv_heads_local=" << kv_heads_local
      << " head_dim=" << head_dim;
  for (int64_t l = 0; l < layers; ++l) {
    k_.emplace_back(alloc, core::MemTag::kKvCache, core::Dtype::kF32,
                    core::Shape{capacity, kv_heads_local, head_dim});
    v_.emplace_back(alloc, core::MemTag::kKvCache, core::Dtype::kF32,
                    core::Shape{capacity, kv_heads_local, head_dim});
  }
}

void KvCache::Advance(int64_t n) {
  PM_CHECK(n >= 0 && length_ + n <= capacity_)
      << "length=" << length_ << " + " << n << " > capacity=" << capacity_;
  length_ += n;
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l) total += k_[l].bytes() + v_[l].bytes();
  return total;
}

}  // namespace pentamesh::model
