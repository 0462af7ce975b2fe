// The CPU candidates of kernels/max.h. argmax: the lines split over the threads, and the
// fallback on one thread (each line is independent, so both give the same indices). The copies
// along the lines move one element per line: one thread.
#include "kernels/max.h"

#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "kernels/elementwise.h"

namespace mixp::kernels {
namespace {

template <typename T>
void argmax_range(const T* x, Lines a, int64_t begin, int64_t end, int64_t* index) {
  for (int64_t p = begin; p < end; ++p) {
    const int64_t o = p / a.inner, i = p % a.inner;
    const T* base = x + o * a.n * a.inner + i;
    int64_t best = 0;
    double best_value = to_double(base[0]);
    for (int64_t k = 1; k < a.n && !std::isnan(best_value); ++k) {
      const double v = to_double(base[k * a.inner]);
      if (v > best_value || std::isnan(v)) {
        best = k;
        best_value = v;
      }
    }
    index[p] = best;
  }
}

template <bool Fallback>
void argmax_cpu(const Tensor& x, Lines a, Tensor& index) {
  visit_floating(x.dtype(), "argmax", [&]<typename T>() {
    const T* in = x.data<T>();
    int64_t* out = index.data<int64_t>();
    if constexpr (Fallback) {
      argmax_range(in, a, 0, a.outer * a.inner, out);
    } else {
      parallel_for(a.outer * a.inner, 1024,
                   [&](int64_t begin, int64_t end) { argmax_range(in, a, begin, end, out); });
    }
  });
}

// The element of line p at position k, as an index into the [outer, n, inner] tensor.
int64_t along(Lines a, int64_t p, int64_t k) {
  const int64_t o = p / a.inner, i = p % a.inner;
  return (o * a.n + k) * a.inner + i;
}

void take_along_cpu(const Tensor& x, Lines a, const Tensor& index, Tensor& values) {
  const int64_t* idx = index.data<int64_t>();
  const size_t size = size_t(size_of(x.dtype()));
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(values.raw_data());
  for (int64_t p = 0; p < a.outer * a.inner; ++p) {
    std::memcpy(dst + size_t(p) * size, src + size_t(along(a, p, idx[p])) * size, size);
  }
}

void put_along_cpu(const Tensor& g, Lines a, const Tensor& index, Tensor& dx) {
  const int64_t* idx = index.data<int64_t>();
  const size_t size = size_t(size_of(g.dtype()));
  const char* src = static_cast<const char*>(g.raw_data());
  char* dst = static_cast<char*>(dx.raw_data());
  for (int64_t p = 0; p < a.outer * a.inner; ++p) {
    std::memcpy(dst + size_t(along(a, p, idx[p])) * size, src + size_t(p) * size, size);
  }
}

}  // namespace

Kernel<ArgmaxLinesFn> argmax_lines("argmax_lines",
                                   {{.name = "openmp", .fn = argmax_cpu<false>},
                                    {.name = "scalar", .fn = argmax_cpu<true>, .fallback = true}});

Kernel<TakeAlongLinesFn> take_along_lines(
    "take_along_lines", {{.name = "scalar", .fn = take_along_cpu, .fallback = true}});

Kernel<PutAlongLinesFn> put_along_lines(
    "put_along_lines", {{.name = "scalar", .fn = put_along_cpu, .fallback = true}});

}  // namespace mixp::kernels
