#include "core/tensor.h"

#include <fmt/format.h>

namespace pentamesh::core {

std::string Shape::ToString() const {
  std::string s = "(";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return s + ")";
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  PM_CHECK(shape_.rank >= 1) << "Rows of a scalar";
  PM_CHECK(0 <= begin && begin <= end && end <= shape_.dims[0])
      << "rows [" << begin << ", " << end << ") of " << shape_.ToString();
  const int64_t row = shape_.dims[0] > 0 ? numel() / shape_.dims[0] : 0;
  Shape s = shape_;
  s.dims[0] = end - begin;
  return Tensor(static_cast<char*>(data_) + begin * row * static_cast<int64_t>(DtypeSize(dtype_)),
                dtype_, s);
}

}  // namespace pentamesh::core
