// Pooling kernels: one plane per task, fp32 compute (double for f64), one rounding per output.
// Each plane is written by one thread, so results do not depend on the thread count.
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/pool.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

template <typename Body>
void for_each_plane(const Pool2dShape& p, Body body) {
  const int64_t work = std::max<int64_t>(1, p.h * p.w + p.rows.size() * p.cols.size());
  parallel_for(p.planes, std::max<int64_t>(1, 16 * kBlock / work), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) body(plane);
  });
}

template <typename T>
void avg_forward(const Pool2dShape& p, const T* x, T* y) {
  using C = Compute<T>;
  const int64_t oh = p.rows.size(), ow = p.cols.size();
  for_each_plane(p, [&](int64_t plane) {
    const T* in = x + plane * p.h * p.w;
    T* out = y + plane * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        C total = 0;
        for (int64_t h = p.rows.start[size_t(i)]; h < p.rows.end[size_t(i)]; ++h) {
          for (int64_t w = p.cols.start[size_t(j)]; w < p.cols.end[size_t(j)]; ++w) {
            total += C(in[h * p.w + w]);
          }
        }
        out[i * ow + j] = T(total / C(p.rows.count[size_t(i)] * p.cols.count[size_t(j)]));
      }
    }
  });
}

template <typename T>
void avg_backward(const Pool2dShape& p, const T* dy, T* dx) {
  using C = Compute<T>;
  const int64_t oh = p.rows.size(), ow = p.cols.size();
  for_each_plane(p, [&](int64_t plane) {
    const T* g = dy + plane * oh * ow;
    std::vector<C> acc(static_cast<size_t>(p.h * p.w), C(0));
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const C share = C(g[i * ow + j]) / C(p.rows.count[size_t(i)] * p.cols.count[size_t(j)]);
        for (int64_t h = p.rows.start[size_t(i)]; h < p.rows.end[size_t(i)]; ++h) {
          for (int64_t w = p.cols.start[size_t(j)]; w < p.cols.end[size_t(j)]; ++w) {
            acc[size_t(h * p.w + w)] += share;
          }
        }
      }
    }
    narrow(acc.data(), p.h * p.w, dx + plane * p.h * p.w);
  });
}

// take ? a : b through an all-ones or all-zeros mask of the bits, so that the compiler cannot
// turn it into a branch.
template <typename V>
V select_bits(bool take, V a, V b) {
  using Bits = std::conditional_t<sizeof(V) == 8, uint64_t, uint32_t>;
  const Bits mask = Bits(0) - Bits(take);
  return std::bit_cast<V>(Bits((std::bit_cast<Bits>(a) & mask) | (std::bit_cast<Bits>(b) & ~mask)));
}

template <typename T>
void max_forward(const Pool2dShape& p, const T* x, T* y, int64_t* index) {
  using C = Compute<T>;
  const int64_t oh = p.rows.size(), ow = p.cols.size();
  for_each_plane(p, [&](int64_t plane) {
    const T* in = x + plane * p.h * p.w;
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        int64_t best = p.rows.start[size_t(i)] * p.w + p.cols.start[size_t(j)];
        C best_value = C(in[best]);
        for (int64_t h = p.rows.start[size_t(i)]; h < p.rows.end[size_t(i)]; ++h) {
          for (int64_t w = p.cols.start[size_t(j)]; w < p.cols.end[size_t(j)]; ++w) {
            // Selected by masks, not by branches: which element of a window is largest is a
            // coin toss that the predictor loses (this scan was a third of a cnn step). First
            // maximum wins; the first NaN wins and stays.
            const C v = C(in[h * p.w + w]);
            const bool take = (!std::isnan(best_value)) & ((v > best_value) | std::isnan(v));
            best = select_bits(take, h * p.w + w, best);
            best_value = select_bits(take, v, best_value);
          }
        }
        const int64_t o = plane * oh * ow + i * ow + j;
        y[o] = in[best];
        index[o] = best;
      }
    }
  });
}

template <typename T>
void max_backward(const Pool2dShape& p, const T* dy, const int64_t* index, T* dx) {
  using C = Compute<T>;
  const int64_t outputs = p.rows.size() * p.cols.size();
  for_each_plane(p, [&](int64_t plane) {
    std::vector<C> acc(static_cast<size_t>(p.h * p.w), C(0));
    for (int64_t k = plane * outputs; k < (plane + 1) * outputs; ++k) {
      acc[size_t(index[k])] += C(dy[k]);
    }
    narrow(acc.data(), p.h * p.w, dx + plane * p.h * p.w);
  });
}

}  // namespace

void avg_pool2d_forward_fast(const Pool2dShape& p, DType dt, const void* x, void* y) {
  visit_floating(dt, "avg_pool2d", [&]<typename T>() {
    avg_forward(p, static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void avg_pool2d_backward_fast(const Pool2dShape& p, DType dt, const void* dy, void* dx) {
  visit_floating(dt, "avg_pool2d", [&]<typename T>() {
    avg_backward(p, static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}

void max_pool2d_forward_fast(const Pool2dShape& p, DType dt, const void* x, void* y,
                             int64_t* index) {
  visit_floating(dt, "max_pool2d", [&]<typename T>() {
    max_forward(p, static_cast<const T*>(x), static_cast<T*>(y), index);
  });
}

void max_pool2d_backward_fast(const Pool2dShape& p, DType dt, const void* dy, const int64_t* index,
                              void* dx) {
  visit_floating(dt, "max_pool2d", [&]<typename T>() {
    max_backward(p, static_cast<const T*>(dy), index, static_cast<T*>(dx));
  });
}

}  // namespace mixp::kernels
