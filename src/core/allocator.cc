#include "core/allocator.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace pentamesh::core {

const char* MemTagName(MemTag tag) {
  switch (tag) {
    case MemTag::kWeights:
      return "weights";
    case MemTag::kGrads:
      return "grads";
    case MemTag::kOptimizer:
      return "optimizer";
    case MemTag::kActivations:
      return "activations";
    case MemTag::kLogits:
      return "logits";
    case MemTag::kComm:
      return "comm";
    case MemTag::kOther:
      return "other";
  }
  return "?";
}

void* Allocator::Allocate(int64_t bytes, MemTag tag) {
  PM_CHECK(bytes >= 0) << "bytes=" << bytes;
  if (bytes == 0) return nullptr;
  const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  PM_CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes for "
                         << MemTagName(tag);
  std::memset(p, 0, rounded);
  const int i = Index(tag);
  live_[i] += bytes;
  live_total_ += bytes;
  if (live_[i] > peak_[i]) peak_[i] = live_[i];
  if (live_total_ > peak_total_) peak_total_ = live_total_;
  return p;
}

void Allocator::Free(void* ptr, int64_t bytes, MemTag tag) {
  if (ptr == nullptr) return;
  const int i = Index(tag);
  PM_CHECK(live_[i] >= bytes) << MemTagName(tag) << " live=" << live_[i] << " free=" << bytes;
  live_[i] -= bytes;
  live_total_ -= bytes;
  std::free(ptr);
}

void Allocator::ResetPeaks() {
  peak_ = live_;
  peak_total_ = live_total_;
}

Buffer::Buffer(Allocator& alloc, MemTag tag, Dtype dtype, Shape shape)
    : alloc_(&alloc), tag_(tag), dtype_(dtype), shape_(shape) {
  bytes_ = shape.numel() * static_cast<int64_t>(DtypeSize(dtype));
  data_ = alloc.Allocate(bytes_, tag);
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Release();
    alloc_ = std::exchange(o.alloc_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    tag_ = o.tag_;
    dtype_ = o.dtype_;
    shape_ = o.shape_;
  }
  return *this;
}

void Buffer::Release() {
  if (alloc_ != nullptr) alloc_->Free(data_, bytes_, tag_);
  alloc_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace pentamesh::core
