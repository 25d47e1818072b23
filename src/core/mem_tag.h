// MemTag: the memory categories the engine's allocator counts (core/allocator.h), which the cost
// model's categories map onto (cost::kMemoryCategories).
#pragma once

#include <cstdint>

namespace pentamesh::core {

enum class MemTag : uint8_t {
  kWeights,      // parameters in the compute dtype
  kGrads,        // fp32 gradients
  kOptimizer,    // Adam m and v, and fp32 master weights in bf16 mode
  kActivations,  // stashes kept from forward to backward
  kLogits,       // logits / loss buffers of the head
  kComm,         // communication buffers
  kOther,        // transient workspaces
  kKvCache,      // generation's key/value cache (model/kv_cache.h); training never allocates it
};
inline constexpr int kMemTagCount = 8;
const char* MemTagName(MemTag tag);  // allocator.cc

}  // namespace pentamesh::core
