// What batch norm's CPU kernels (kernels/cpu/batch_norm.cpp) and the pooled ones
// (kernels/cpu/batch_norm_relu_pool.cpp) share: x viewed as [n, c, s], its runs split into
// chunks whose per-channel partial sums are added in a fixed order, and the statistics a
// forward computes and saves. Private to mixp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/batch_norm.h"
#include "kernels/cpu/batch_norm_rows.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "tensor/element.h"

namespace mixp::kernels::batch_norm_chunks {

/// The 16-bit formats whose runs the rows candidates read in registers.
template <typename T>
constexpr bool kHalf = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;
template <typename T>
constexpr avx512_bf16::Half half_of() {
  return std::is_same_v<T, bfloat16> ? avx512_bf16::Half::bf16 : avx512_bf16::Half::f16;
}

/// x viewed as [n, c, s]: "units" are the n * c contiguous runs of s values, unit u belongs to
/// channel u % c.
struct Geometry {
  int64_t n, c, s;
  int64_t units() const { return n * c; }
  int64_t per_channel() const { return n * s; }
  /// Units per parallel chunk: about 16 blocks of values.
  int64_t grain() const { return std::max<int64_t>(1, 16 * kBlock / std::max<int64_t>(s, 1)); }
};

inline Geometry geometry_of(const Shape& shape) {
  Geometry geo{.n = shape[0], .c = shape[1], .s = 1};
  for (int d = 2; d < shape.ndim(); ++d) geo.s *= shape[d];
  return geo;
}

/// Per-channel sums of `k` quantities: chunk(begin, end, partial) adds the contributions of
/// units [begin, end) to partial[channel * k + i]. Chunks are fixed by the geometry and their
/// partials are added in chunk order, so the sums do not depend on the thread count.
template <typename Acc, typename Chunk>
std::vector<Acc> channel_sums(Geometry geo, int64_t k, const Chunk& chunk) {
  const int64_t grain = geo.grain(), units = geo.units();
  const int64_t chunks = (units + grain - 1) / grain;
  std::vector<Acc> partial(static_cast<size_t>(chunks * geo.c * k), Acc(0));
  parallel_for(units, grain, [&](int64_t begin, int64_t end) {
    chunk(begin, end, partial.data() + (begin / grain) * geo.c * k);
  });
  std::vector<Acc> total(static_cast<size_t>(geo.c * k), Acc(0));
  for (int64_t p = 0; p < chunks; ++p) {
    for (int64_t i = 0; i < geo.c * k; ++i) total[size_t(i)] += partial[size_t(p * geo.c * k + i)];
  }
  return total;
}

/// A chunk's widened values: every element is written before it is read, so the buffer is
/// left uninitialized (a zeroed std::vector cost a memset of every chunk: 3% of a cnn step).
template <typename C>
std::unique_ptr<C[]> chunk_scratch(int64_t len) {
  return std::make_unique_for_overwrite<C[]>(static_cast<size_t>(len));
}

/// The per-channel statistics a forward uses and saves.
template <typename Acc>
struct Stats {
  std::vector<Acc> mean, rstd;
  std::vector<Acc> var;  // training: the biased batch variance, for the running update
};

/// Stores values[c * stride + offset] into channel c of `t`, each rounded once to its dtype.
template <typename Acc>
void store_channels(const std::vector<Acc>& values, int64_t stride, int64_t offset, Tensor& t) {
  for (int64_t c = 0; c < t.numel(); ++c)
    store_element(t.raw_data(), t.dtype(), c, double(values[size_t(c * stride + offset)]));
}

/// Copies the statistics used into the tensors saved for backward.
template <typename Acc, typename C>
void save_stats(const Stats<Acc>& st, Tensor& mean, Tensor& rstd) {
  for (size_t c = 0; c < st.mean.size(); ++c) {
    mean.data<C>()[c] = C(st.mean[c]);
    rstd.data<C>()[c] = C(st.rstd[c]);
  }
}

/// The statistics the fast forwards normalize with (fp32, f64 for f64): in training the
/// batch's, summed in chunks (Rows: bf16 and f16 runs from registers, the same bits), the
/// running stats updated from them; in evaluation the running stats. Defined for the four
/// floating storage types in kernels/cpu/batch_norm.cpp.
template <typename T, bool Rows>
Stats<Compute<T>> fast_forward_stats(const Tensor& x, Geometry geo, BatchNormParams params,
                                     Tensor& running_mean, Tensor& running_var);

}  // namespace mixp::kernels::batch_norm_chunks
