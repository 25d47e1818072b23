// Allocator and Buffer: every Buffer the engine allocates is tagged with the planner's memory
// category, and the allocator keeps the live and peak bytes of each tag (and of their sum).
// Optionally it enforces a cap on the live total (set_limit_bytes: run.memory_limit_bytes): an
// allocation that would take the live total above the cap is refused before any memory is taken,
// with a message naming the tag, the request, the live bytes per tag and the cap, passed to the
// limit handler (default: print it as "pentamesh: error: ..." on stderr and exit with status 2,
// so an over-budget run ends with a clear error instead of an OOM kill).
// Invariant: live(tag) is exactly the sum of the sizes of the Buffers of that tag now alive;
// peak(tag) is the maximum live(tag) has reached since construction or the last ResetPeaks();
// with a cap set, live total <= cap always.
// Not thread-safe: one Allocator per process/rank, used from the training thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

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

  // Cap on the live total in bytes; 0 = none. REQUIRES: limit_bytes >= 0.
  void set_limit_bytes(int64_t limit_bytes);
  int64_t limit_bytes() const { return limit_bytes_; }
  // Called with the message when an allocation would cross the cap; it must not return normally
  // (exit or throw). Default: DefaultLimitHandler.
  using LimitHandler = std::function<void(const std::string& message)>;
  void set_limit_handler(LimitHandler handler) { on_limit_ = std::move(handler); }
  // Prints "pentamesh: error: <message>" on stderr and exits with status 2.
  [[noreturn]] static void DefaultLimitHandler(const std::string& message);

 private:
  void RefuseOverLimit(int64_t bytes, MemTag tag) const;
  static int Index(MemTag tag) { return static_cast<int>(tag); }
  std::array<int64_t, kMemTagCount> live_{};
  std::array<int64_t, kMemTagCount> peak_{};
  int64_t live_total_ = 0;
  int64_t peak_total_ = 0;
  int64_t limit_bytes_ = 0;
  LimitHandler on_limit_;
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
