// The cpu candidate of kernels/expand.h: one element at a time, its offset in t from the
// broadcast strides.
#include "kernels/expand.h"

#include <cstring>

#include "kernels/elementwise.h"

namespace mixp::kernels {
namespace {

void expand_cpu(const Tensor& t, Tensor& out) {
  const Shape& shape = out.shape();
  const int nd = shape.ndim();
  const std::vector<int64_t> strides = broadcast_strides(t.shape(), shape);
  const size_t size = size_t(size_of(t.dtype()));
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, offset = 0;
    for (int d = nd - 1; d >= 0; --d) {
      offset += (rest % shape[d]) * strides[size_t(d)];
      rest /= shape[d];
    }
    std::memcpy(dst + size_t(i) * size, src + size_t(offset) * size, size);
  }
}

}  // namespace

Kernel<ExpandFn> expand("expand", {{.name = "scalar", .fn = expand_cpu, .fallback = true}});

}  // namespace mixp::kernels
