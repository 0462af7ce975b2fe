// The CPU candidates of kernels/copy_along.h: the outer rows split over the threads, and the
// fallback on one thread (the same bytes).
#include "kernels/copy_along.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace mixp::kernels {
namespace {

template <bool Fallback>
void copy_along_cpu(const Tensor& src, int64_t src_start, Tensor& dst, int64_t dst_start, int dim,
                    int64_t length) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= src.shape()[d];
  for (int d = dim + 1; d < src.ndim(); ++d) inner *= src.shape()[d];
  const size_t esize = size_t(size_of(src.dtype()));
  const size_t row = size_t(length * inner) * esize;
  const int64_t src_row = src.shape()[dim] * inner, dst_row = dst.shape()[dim] * inner;
  if (row == 0 || outer == 0) return;
  const char* from = static_cast<const char*>(src.raw_data()) + size_t(src_start * inner) * esize;
  char* to = static_cast<char*>(dst.raw_data()) + size_t(dst_start * inner) * esize;
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      std::memcpy(to + size_t(o * dst_row) * esize, from + size_t(o * src_row) * esize, row);
    }
  };
  if constexpr (Fallback) {
    rows(0, outer);
  } else {
    parallel_for(outer, std::max<int64_t>(1, int64_t(65536 / row)), rows);
  }
}

}  // namespace

Kernel<CopyAlongFn> copy_along("copy_along",
                               {{.name = "openmp", .fn = copy_along_cpu<false>},
                                {.name = "scalar", .fn = copy_along_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
