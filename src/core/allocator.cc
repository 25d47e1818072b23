#include "core/allocator.h"

#include <fmt/format.h>

#include <cstdio>
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
    case MemTag::kKvCache:
      return "kv_cache";
  }
  return "?";
}

void* Allocator::Allocate(int64_t bytes, MemTag tag) {
  PM_CHECK(bytes >= 0) << "bytes=" << bytes;
  if (bytes == 0) return nullptr;
  if (limit_bytes_ > 0 && live_total_ + bytes > limit_bytes_) RefuseOverLimit(bytes, tag);
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

void Allocator::set_limit_bytes(int64_t limit_bytes) {
  PM_CHECK(limit_bytes >= 0) << "limit_bytes=" << limit_bytes;
  limit_bytes_ = limit_bytes;
}

void Allocator::DefaultLimitHandler(const std::string& message) {
  std::fprintf(stderr, "pentamesh: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(2);  // no unwinding: the caller holds no state worth saving, and MPI peers see it
}

void Allocator::RefuseOverLimit(int64_t bytes, MemTag tag) const {
  std::string live;
  for (int i = 0; i < kMemTagCount; ++i) {
    if (live_[i] == 0) continue;
    live += fmt::format("{}{} {}", live.empty() ? "" : ", ", MemTagName(static_cast<MemTag>(i)),
                        live_[i]);
  }
  const std::string message = fmt::format(
      "run.memory_limit_bytes={}: allocating {} bytes of {} would bring the live total to {} bytes "
      "(live now: {}{})",
      limit_bytes_, bytes, MemTagName(tag), live_total_ + bytes, live_total_,
      live.empty() ? "" : " = " + live);
  if (on_limit_) on_limit_(message);
  DefaultLimitHandler(message);
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
