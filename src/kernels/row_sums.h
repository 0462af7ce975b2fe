// Sums and dot products along one row, and a small tensor's values as a vector: what the norm
// kernels and the ops' helpers share. Private to mixp.
//
// fp32 rows go to the vectorized kernels in their fixed 16-lane order (kernels/vmath.h: serial
// fp32 sums, one dependent addition after another, were most of layer norm's and batch norm's
// time); f64 rows are summed serially.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/vmath.h"
#include "mixp/tensor.h"
#include "tensor/element.h"

namespace mixp::kernels {

template <typename C>
C row_sum(const C* x, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    return sum_f32(x, n);
  } else {
    C total = 0;
    for (int64_t j = 0; j < n; ++j) total += x[j];
    return total;
  }
}

template <typename C>
C row_dot(const C* a, const C* b, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    return dot_f32(a, b, n);
  } else {
    C total = 0;
    for (int64_t j = 0; j < n; ++j) total += a[j] * b[j];
    return total;
  }
}

/// The elements of `t` (any dtype) as Acc, or an empty vector when `t` is undefined.
template <typename Acc>
std::vector<Acc> values_as(const Tensor& t) {
  std::vector<Acc> out;
  if (!t.defined()) return out;
  out.resize(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    out[size_t(i)] = Acc(load_element(t.raw_data(), t.dtype(), i));
  return out;
}

/// `values` into `t`, each rounded once to its dtype; nothing when `t` is undefined.
template <typename Acc>
void store_values(const std::vector<Acc>& values, Tensor& t) {
  if (!t.defined()) return;
  for (size_t i = 0; i < values.size(); ++i)
    store_element(t.raw_data(), t.dtype(), int64_t(i), double(values[i]));
}

/// sum[j] += parts[c n + j] for each of `chunks` rows of n partial sums, in chunk order: the
/// per-chunk partials of a parallel reduction, added so that the result does not depend on the
/// thread count.
template <typename Acc>
void add_chunk_partials(const std::vector<Acc>& parts, int64_t chunks, int64_t n,
                        std::vector<Acc>& sum) {
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t j = 0; j < n; ++j) sum[size_t(j)] += parts[size_t(c * n + j)];
  }
}

}  // namespace mixp::kernels
