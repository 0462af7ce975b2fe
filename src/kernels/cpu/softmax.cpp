// The CPU candidates of kernels/softmax.h: lines split over the threads and accumulated in the
// dtype's compute type, and the fallback, one thread accumulating in double.
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/elementwise.h"

namespace mixp::kernels {
namespace {

// body(base) for each [outer, inner] position; base indexes the first of its n values, which
// are `inner` apart.
template <typename Body>
void for_each_line(Lines a, bool parallel, Body body) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t o = p / a.inner, i = p % a.inner;
      body(o * a.n * a.inner + i);
    }
  };
  if (parallel) {
    parallel_for(a.outer * a.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(a.n, 1)), run);
  } else {
    run(0, a.outer * a.inner);
  }
}

template <typename T, typename Acc>
void softmax_lines_of(const T* x, T* y, Lines a, bool log, bool parallel) {
  for_each_line(a, parallel, [&](int64_t base) {
    const int64_t s = a.inner;
    Acc m = Acc(to_double(x[base]));
    for (int64_t k = 1; k < a.n; ++k) m = std::max(m, Acc(to_double(x[base + k * s])));
    Acc total = 0;
    for (int64_t k = 0; k < a.n; ++k) total += std::exp(Acc(to_double(x[base + k * s])) - m);
    const Acc log_total = std::log(total);
    for (int64_t k = 0; k < a.n; ++k) {
      const Acc v = Acc(to_double(x[base + k * s])) - m;
      y[base + k * s] = from_double<T>(double(log ? v - log_total : std::exp(v) / total));
    }
  });
}

template <typename T, typename Acc>
void softmax_backward_lines_of(const T* g, const T* y, T* dx, Lines a, bool log, bool parallel) {
  for_each_line(a, parallel, [&](int64_t base) {
    const int64_t s = a.inner;
    Acc dot = 0;
    for (int64_t k = 0; k < a.n; ++k) {
      const Acc gk = Acc(to_double(g[base + k * s]));
      dot += log ? gk : gk * Acc(to_double(y[base + k * s]));
    }
    for (int64_t k = 0; k < a.n; ++k) {
      const Acc gk = Acc(to_double(g[base + k * s]));
      const Acc yk = Acc(to_double(y[base + k * s]));
      dx[base + k * s] = from_double<T>(double(log ? gk - std::exp(yk) * dot : yk * (gk - dot)));
    }
  });
}

template <bool Fallback>
void softmax_cpu(const Tensor& x, Tensor& y, Lines a, bool log) {
  visit_floating(x.dtype(), "softmax", [&]<typename T>() {
    using Acc = std::conditional_t<Fallback, double, Compute<T>>;
    softmax_lines_of<T, Acc>(x.data<T>(), y.data<T>(), a, log, !Fallback);
  });
}

template <bool Fallback>
void softmax_backward_cpu(const Tensor& g, const Tensor& y, Tensor& dx, Lines a, bool log) {
  visit_floating(y.dtype(), "softmax", [&]<typename T>() {
    using Acc = std::conditional_t<Fallback, double, Compute<T>>;
    softmax_backward_lines_of<T, Acc>(g.data<T>(), y.data<T>(), dx.data<T>(),
                                      a, log, !Fallback);
  });
}

}  // namespace

Kernel<SoftmaxFn> softmax_lines("softmax_lines",
                                {{.name = "openmp", .fn = softmax_cpu<false>},
                                 {.name = "scalar", .fn = softmax_cpu<true>, .fallback = true}});

Kernel<SoftmaxBackwardFn> softmax_backward_lines(
    "softmax_backward_lines",
    {{.name = "openmp", .fn = softmax_backward_cpu<false>},
     {.name = "scalar", .fn = softmax_backward_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
