// Tensor: a non-owning view of a dense row-major array (data pointer, Dtype, Shape of <= 4 dims),
// passed by value. ConstTensor is the read-only view kernels take as inputs.
// Invariant: a view never owns or frees memory; the Buffer it points into must outlive it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace pentamesh::core {

struct Shape {
  static constexpr int kMaxDims = 4;
  int64_t dims[kMaxDims] = {0, 0, 0, 0};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    PM_CHECK(static_cast<int>(d.size()) <= kMaxDims) << "rank " << d.size();
    for (int64_t v : d) {
      PM_CHECK(v >= 0) << "negative dim " << v;
      dims[rank++] = v;
    }
  }
  int64_t operator[](int i) const {
    PM_CHECK(i >= 0 && i < rank) << "dim " << i << " of rank " << rank;
    return dims[i];
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  std::string ToString() const;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, Dtype dtype, Shape shape) : data_(data), dtype_(dtype), shape_(shape) {}
  Tensor(float* data, Shape shape) : Tensor(data, Dtype::kF32, shape) {}

  void* data() const { return data_; }
  Dtype dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  int64_t bytes() const { return numel() * static_cast<int64_t>(DtypeSize(dtype_)); }
  bool empty() const { return data_ == nullptr; }

  float* f32() const {
    PM_CHECK(dtype_ == Dtype::kF32) << "tensor is " << DtypeName(dtype_) << ", want f32";
    return static_cast<float*>(data_);
  }
  uint16_t* bf16() const {
    PM_CHECK(dtype_ == Dtype::kBF16) << "tensor is " << DtypeName(dtype_) << ", want bf16";
    return static_cast<uint16_t*>(data_);
  }
  int32_t* i32() const {
    PM_CHECK(dtype_ == Dtype::kI32) << "tensor is " << DtypeName(dtype_) << ", want i32";
    return static_cast<int32_t*>(data_);
  }
  // Same memory, new shape with the same element count.
  Tensor Reshape(Shape shape) const {
    PM_CHECK(shape.numel() == numel()) << shape.ToString() << " vs " << shape_.ToString();
    return Tensor(data_, dtype_, shape);
  }
  // Rows [begin, end) of dim 0 (a contiguous sub-view).
  Tensor Rows(int64_t begin, int64_t end) const;

 private:
  void* data_ = nullptr;
  Dtype dtype_ = Dtype::kF32;
  Shape shape_;
};

// Read-only view; implicitly made from a Tensor so outputs can feed the next op's inputs.
class ConstTensor {
 public:
  ConstTensor() = default;
  ConstTensor(const Tensor& t) : t_(t) {}  // NOLINT: implicit by design
  ConstTensor(const float* data, Shape shape)
      : t_(const_cast<float*>(data), Dtype::kF32, shape) {
  }  // NOLINT(cppcoreguidelines-pro-type-const-cast)

  const float* f32() const { return t_.f32(); }
  const uint16_t* bf16() const { return t_.bf16(); }
  const int32_t* i32() const { return t_.i32(); }
  Dtype dtype() const { return t_.dtype(); }
  const Shape& shape() const { return t_.shape(); }
  int64_t dim(int i) const { return t_.dim(i); }
  int64_t numel() const { return t_.numel(); }
  bool empty() const { return t_.empty(); }
  ConstTensor Reshape(Shape shape) const { return ConstTensor(t_.Reshape(shape)); }
  ConstTensor Rows(int64_t begin, int64_t end) const { return ConstTensor(t_.Rows(begin, end)); }

 private:
  Tensor t_;
};

}  // namespace pentamesh::core
