// Elementwise and reduction kernels over contiguous buffers, in two versions:
//   fast       blocks of 1024 widened to fp32 with the bulk kernels, computed in fp32, narrowed
//              once with round-to-nearest-even, split over OpenMP threads;
//   reference  one element at a time, computed in double, narrowed once.
// Elements of f64 tensors are computed in double by both. Op functors (src/ops/) supply the
// math as templates over the compute type, so both versions run the same formula.
// Private to mixp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/vmath.h"
#include "mixp/convert.h"
#include "mixp/tensor.h"
#include "tensor/element.h"

namespace mixp::kernels {

/// fp32 for every storage type but double.
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

inline constexpr int64_t kBlock = 1024;

/// Elements per chunk of the elementwise maps, so that a tensor of fewer than two chunks is
/// mapped on the calling thread. A parallel region wakes the sleeping worker: tens of
/// microseconds, and up to a scheduler tick when the other core is busy, about what a core
/// takes for 64K elements of the cheap maps (relu and its gradient, add, mul). Each element's
/// result does not depend on the split.
inline constexpr int64_t kMapGrain = 64 * kBlock;

template <typename T>
inline void widen(const T* src, int64_t n, Compute<T>* dst) {
  if constexpr (std::is_same_v<T, Compute<T>>) {
    std::memcpy(dst, src, size_t(n) * sizeof(T));
  } else {
    convert(std::span<const T>(src, size_t(n)), std::span<float>(dst, size_t(n)));
  }
}

template <typename T>
inline void narrow(const Compute<T>* src, int64_t n, T* dst) {
  if constexpr (std::is_same_v<T, Compute<T>>) {
    std::memcpy(dst, src, size_t(n) * sizeof(T));
  } else {
    convert(std::span<const float>(src, size_t(n)), std::span<T>(dst, size_t(n)));
  }
}

/// One element to double and back, rounding once (the reference path).
template <typename T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return double(float(v));
}
template <typename T>
inline T from_double(double v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else if constexpr (std::is_same_v<T, float>)
    return float(v);
  else
    return T(round_to_float_odd(v));
}

// ---- out[i] = f(in[i]) ----
template <typename T, typename F>
void map1_fast(const T* in, T* out, int64_t n, const F& f) {
  using C = Compute<T>;
  if constexpr (std::is_same_v<T, C>) {  // fp32 and f64 need no widening: no staging copies
    parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
    });
    return;
  }
  parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
    C x[kBlock], y[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      widen(in + i, len, x);
      for (int64_t j = 0; j < len; ++j) y[j] = f(x[j]);
      narrow(y, len, out + i);
    }
  });
}

/// As map1_fast, but `block(const float* x, float* y, len)` computes a whole block of fp32
/// values at once (a vectorized kernel); fp32 data is read and written in place, unwidened.
template <typename T, typename Block>
void map1_block_fast(const T* in, T* out, int64_t n, const Block& block) {
  static_assert(!std::is_same_v<T, double>, "f64 has no block kernels");
  parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      block(in + begin, out + begin, end - begin);
    } else {
      float x[kBlock];
      for (int64_t i = begin; i < end; i += kBlock) {
        const int64_t len = std::min(kBlock, end - i);
        widen(in + i, len, x);
        block(x, x, len);
        narrow(x, len, out + i);
      }
    }
  });
}

template <typename T, typename F>
void map1_reference(const T* in, T* out, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = from_double<T>(f(to_double(in[i])));
}

// ---- out[i] = f(a[i], b[i]) ----
template <typename T, typename F>
void map2_fast(const T* a, const T* b, T* out, int64_t n, const F& f) {
  using C = Compute<T>;
  if constexpr (std::is_same_v<T, C>) {
    parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
    });
    return;
  }
  parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
    C x[kBlock], y[kBlock], z[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      widen(a + i, len, x);
      widen(b + i, len, y);
      for (int64_t j = 0; j < len; ++j) z[j] = f(x[j], y[j]);
      narrow(z, len, out + i);
    }
  });
}

/// out[i] = f(a[i], b[i]) in fp32, where one of a and b is fp32 and the other bf16 or f16: the
/// narrow one is widened (exactly) a block at a time, not copied whole first.
template <typename A, typename B, typename F>
void map2_widening_fast(const A* a, const B* b, float* out, int64_t n, const F& f) {
  parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
    float x[kBlock], y[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      const float* xs = x;
      const float* ys = y;
      if constexpr (std::is_same_v<A, float>) {
        xs = a + i;
      } else {
        widen(a + i, len, x);
      }
      if constexpr (std::is_same_v<B, float>) {
        ys = b + i;
      } else {
        widen(b + i, len, y);
      }
      for (int64_t j = 0; j < len; ++j) out[i + j] = f(xs[j], ys[j]);
    }
  });
}

/// As map2_fast, with `block(const float* a, const float* b, float* out, len)` on fp32 blocks.
template <typename T, typename Block>
void map2_block_fast(const T* a, const T* b, T* out, int64_t n, const Block& block) {
  static_assert(!std::is_same_v<T, double>, "f64 has no block kernels");
  parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      block(a + begin, b + begin, out + begin, end - begin);
    } else {
      float x[kBlock], y[kBlock];
      for (int64_t i = begin; i < end; i += kBlock) {
        const int64_t len = std::min(kBlock, end - i);
        widen(a + i, len, x);
        widen(b + i, len, y);
        block(x, y, x, len);
        narrow(x, len, out + i);
      }
    }
  });
}

template <typename T, typename F>
void map2_reference(const T* a, const T* b, T* out, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = from_double<T>(f(to_double(a[i]), to_double(b[i])));
}

// ---- out[i] = f(a[i], b[i], c[i]) ----
template <typename T, typename F>
void map3_fast(const T* a, const T* b, const T* c, T* out, int64_t n, const F& f) {
  using C = Compute<T>;
  if constexpr (std::is_same_v<T, C>) {
    parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i], c[i]);
    });
    return;
  }
  parallel_for(n, kMapGrain, [&](int64_t begin, int64_t end) {
    C x[kBlock], y[kBlock], z[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      widen(a + i, len, x);
      widen(b + i, len, y);
      widen(c + i, len, z);
      for (int64_t j = 0; j < len; ++j) x[j] = f(x[j], y[j], z[j]);
      narrow(x, len, out + i);
    }
  });
}

template <typename T, typename F>
void map3_reference(const T* a, const T* b, const T* c, T* out, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = from_double<T>(f(to_double(a[i]), to_double(b[i]), to_double(c[i])));
  }
}

/// Strides (in elements) that broadcast a tensor of `shape` to `out_shape`: 0 where the
/// tensor has size 1 or lacks the dimension.
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out_shape);

// ---- out = f(a, b) with broadcasting; the last dimension runs in the inner loop ----
template <typename T, typename F, bool Reference>
void broadcast_map2(const T* a, const Shape& sa, const T* b, const Shape& sb, T* out,
                    const Shape& so, const F& f) {
  const int nd = so.ndim();
  const std::vector<int64_t> stride_a = broadcast_strides(sa, so),
                             stride_b = broadcast_strides(sb, so);
  const int64_t inner = nd == 0 ? 1 : so[nd - 1];
  const int64_t rows = inner == 0 ? 0 : so.numel() / inner;
  const int64_t ia = nd == 0 ? 0 : stride_a[size_t(nd - 1)],
                ib = nd == 0 ? 0 : stride_b[size_t(nd - 1)];
  auto row = [&](int64_t r) {
    int64_t off_a = 0, off_b = 0, rest = r;
    for (int d = nd - 2; d >= 0; --d) {
      const int64_t idx = rest % so[d];
      rest /= so[d];
      off_a += idx * stride_a[size_t(d)];
      off_b += idx * stride_b[size_t(d)];
    }
    T* o = out + r * inner;
    for (int64_t j = 0; j < inner; ++j) {
      if constexpr (Reference) {
        o[j] = from_double<T>(f(to_double(a[off_a + j * ia]), to_double(b[off_b + j * ib])));
      } else {
        using C = Compute<T>;
        o[j] = T(f(C(a[off_a + j * ia]), C(b[off_b + j * ib])));
      }
    }
  };
  if constexpr (Reference) {
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    parallel_for(rows, std::max<int64_t>(1, kMapGrain / std::max<int64_t>(inner, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) row(r);
                 });
  }
}

/// Sum of n values in Acc, in blocks of 256 whose partial sums are then added: the error grows
/// with n / 256 + 256 rather than n.
template <typename Acc, typename T>
inline Acc blocked_sum(const T* x, int64_t n) {
  Acc total = 0;
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t end = std::min(n, i + 256);
    Acc block = 0;
    for (int64_t j = i; j < end; ++j) block += Acc(to_double(x[j]));
    total += block;
  }
  return total;
}

/// acc[i] += row[i] for i < n: the vectorized kernels for fp32 sums of f32, bf16 and f16 rows
/// (the same bits as the loop: one exact widening and one addition each).
template <typename T, typename Acc>
inline void accumulate_row(const T* row, Acc* acc, int64_t n) {
  if constexpr (std::is_same_v<Acc, float> && std::is_same_v<T, float>) {
    accumulate_f32(row, acc, n);
  } else if constexpr (std::is_same_v<Acc, float> && std::is_same_v<T, bfloat16>) {
    accumulate_bf16(reinterpret_cast<const uint16_t*>(row), acc, n);
  } else if constexpr (std::is_same_v<Acc, float> && std::is_same_v<T, float16>) {
    accumulate_f16(reinterpret_cast<const uint16_t*>(row), acc, n);
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += Acc(to_double(row[i]));
  }
}

}  // namespace mixp::kernels
