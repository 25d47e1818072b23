// Allocator and Buffer: every Buffer the engine allocates is tagged with the planner's memory
// category, and the allocator keeps the live and peak bytes of each tag (and of their sum).
// Invariant: live(tag) is exactly the sum of the sizes of the Buffers of that tag now alive;
// peak(tag) is the maximum live(tag) has reached since construction or the last ResetPeaks().
// Not thread-safe: one Allocator per process/rank, used from the training thread.
#pragma once

#include <array>
#include <cstdint>

#include "core/mem_tag.h"
#include "core/tensor.h"

namespace pentamesh::core {

class Allocator {
 public:
  Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  void* Allocate(int64_t bytes, MemTag tag);  // 64-byte aligned, zero-filled
  void Free(void* ptr, int64_t bytes, MemTag tag);

  int64_t live_bytes(MemTag tag) const { return live_[Index(tag)]; }
  int64_t peak_bytes(MemTag tag) const { return peak_[Index(tag)]; }
  int64_t live_bytes_total() const { return live_total_; }
  int64_t peak_bytes_total() const { return peak_total_; }
  // Peaks restart from the bytes live now (e.g. per step).
  void ResetPeaks();

 private:
  static int Index(MemTag tag) { return static_cast<int>(tag); }
  std::array<int64_t, kMemTagCount> live_{};
  std::array<int64_t, kMemTagCount> peak_{};
  int64_t live_total_ = 0;
  int64_t peak_total_ = 0;
};

// Owning RAII memory of one tag; movable, not copyable.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator& alloc, MemTag tag, Dtype dtype, Shape shape);
  ~Buffer() { Release(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Tensor view() const { return Tensor(data_, dtype_, shape_); }
  float* f32() const { return view().f32(); }
  int32_t* i32() const { return view().i32(); }
  int64_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }
  MemTag tag() const { return tag_; }
  Dtype dtype() const { return dtype_; }
  Allocator* allocator() const { return alloc_; }
  void Release();

 private:
  Allocator* alloc_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  MemTag tag_ = MemTag::kOther;
  Dtype dtype_ = Dtype::kF32;
  Shape shape_;
};

}  // namespace pentamesh::core
