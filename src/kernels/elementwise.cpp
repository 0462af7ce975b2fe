#include "kernels/elementwise.h"

#include "mixp/error.h"

namespace mixp::kernels {

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out_shape) {
  const int nd = out_shape.ndim();
  const int offset = nd - shape.ndim();
  MIXP_ASSERT(offset >= 0);
  std::vector<int64_t> strides(static_cast<size_t>(nd), 0);
  int64_t stride = 1;
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    strides[size_t(d + offset)] = shape[d] == 1 ? 0 : stride;
    stride *= shape[d];
  }
  return strides;
}

}  // namespace mixp::kernels
