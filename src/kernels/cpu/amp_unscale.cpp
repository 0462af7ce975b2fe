// The CPU candidates of kernels/amp_unscale.h: a gradient in chunks over the threads, each
// chunk widened block by block, checked, scaled and narrowed in one pass (fp32 gradients on
// AVX-512 in registers, kernels/cpu/amp_unscale_avx512.cpp); the fallback runs the same chunks
// on one thread (the same bits and the same first index).
#include "kernels/amp_unscale.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/amp_unscale_isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "mixp/convert.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kChunk = 64 * kBlock;

template <typename T>
constexpr bool kIsFp8 = std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2>;

// elementwise.h's widen and narrow, plus FP8 at scale 1 (gradients may be FP8 codes); an
// overflow of an FP8 code is kept as inf or NaN, so that the next check finds it.
template <typename T>
void widen_gradient(const T* src, int64_t n, float* dst) {
  if constexpr (kIsFp8<T>) {
    convert(std::span<const T>(src, size_t(n)), std::span<float>(dst, size_t(n)), 1.0f);
  } else {
    widen(src, n, dst);
  }
}

template <typename T>
void narrow_gradient(const float* src, int64_t n, T* dst) {
  if constexpr (kIsFp8<T>) {
    convert(std::span<const float>(src, size_t(n)), std::span<T>(dst, size_t(n)), 1.0f,
            Overflow::inf_or_nan);
  } else {
    narrow(src, n, dst);
  }
}

// Checks x[0, n) for inf/NaN and, when `multiply`, scales it by `inv`. Returns the index of the
// first non-finite element, or -1.
template <typename C>
int64_t check_and_scale(C* x, int64_t n, C inv, bool multiply) {
  constexpr C kMax = std::numeric_limits<C>::max();
  bool bad = false;
  for (int64_t j = 0; j < n; ++j) bad |= !(std::abs(x[j]) <= kMax);  // false for NaN too
  int64_t first = -1;
  if (bad) {
    for (int64_t j = 0; j < n && first < 0; ++j) {
      if (!std::isfinite(x[j])) first = j;
    }
  }
  if (multiply) {
    for (int64_t j = 0; j < n; ++j) x[j] = x[j] * inv;
  }
  return first;
}

// One chunk of a gradient: widened block by block, checked, scaled and narrowed in one pass.
template <typename T>
int64_t unscale_chunk(T* data, int64_t n, float inv, bool multiply) {
  using C = Compute<T>;
  int64_t first = -1;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t len = std::min(kBlock, n - i);
    int64_t bad;
    if constexpr (std::is_same_v<T, C>) {
      bad = check_and_scale<C>(data + i, len, C(inv), multiply);
    } else {
      float buffer[kBlock];
      widen_gradient(data + i, len, buffer);
      bad = check_and_scale<float>(buffer, len, inv, multiply);
      if (multiply) narrow_gradient(buffer, len, data + i);
    }
    if (bad >= 0 && first < 0) first = i + bad;
  }
  return first;
}

// Unscales a whole gradient over threads; returns the first non-finite element or -1. Each
// chunk records its own first index, and the chunks are combined in order, so the answer is
// the same for any thread count.
template <bool Parallel, typename T, auto Chunk = unscale_chunk<T>>
int64_t unscale_gradient(T* data, int64_t n, float inv, bool multiply) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<int64_t> first;
  first.assign(size_t(chunks), -1);
  auto run = [&](int64_t begin, int64_t end) {
    const int64_t bad = Chunk(data + begin, end - begin, inv, multiply);
    first[size_t(begin / kChunk)] = bad < 0 ? -1 : begin + bad;
  };
  if constexpr (Parallel) {
    parallel_for(n, kChunk, run);
  } else {
    for (int64_t begin = 0; begin < n; begin += kChunk) run(begin, std::min(n, begin + kChunk));
  }
  for (int64_t f : first) {
    if (f >= 0) return f;
  }
  return -1;
}

template <bool Parallel>
int64_t unscale_and_check_cpu(Tensor& grad, float inv, bool multiply) {
  const int64_t n = grad.numel();
  switch (grad.dtype()) {
    case DType::f32: return unscale_gradient<Parallel>(grad.data<float>(), n, inv, multiply);
    case DType::f64: return unscale_gradient<Parallel>(grad.data<double>(), n, inv, multiply);
    case DType::f16: return unscale_gradient<Parallel>(grad.data<float16>(), n, inv, multiply);
    case DType::bf16: return unscale_gradient<Parallel>(grad.data<bfloat16>(), n, inv, multiply);
    case DType::e4m3: return unscale_gradient<Parallel>(grad.data<float8_e4m3>(), n, inv, multiply);
    case DType::e5m2: return unscale_gradient<Parallel>(grad.data<float8_e5m2>(), n, inv, multiply);
    default: break;
  }
  MIXP_CHECK(false, "GradScaler::unscale: a gradient of dtype ", name_of(grad.dtype()),
             " is not floating");
  return -1;
}

int64_t unscale_f32_avx512(Tensor& grad, float inv, bool multiply) {
  return unscale_gradient<true, float, avx512::unscale_f32>(grad.data<float>(), grad.numel(), inv,
                                                           multiply);
}

bool is_f32(const Tensor& grad, const float&, const bool&) { return grad.dtype() == DType::f32; }

// fp16 flushes |g| <= 2^-25 (half its smallest subnormal, the tie going to 0).
constexpr double kFp16Flush = 0x1p-25;

FlushCount count_fp16_flushable_cpu(const Tensor& grad) {
  const Tensor g = grad.dtype() == DType::f32 ? grad : grad.to(DType::f32);
  const float* p = g.data<float>();
  FlushCount count;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = std::fabs(double(p[i]));
    count.flushable += a <= kFp16Flush;
    if (a > count.max_abs && std::isfinite(a)) count.max_abs = a;
  }
  return count;
}

}  // namespace

Kernel<UnscaleAndCheckFn> unscale_and_check(
    "unscale_and_check",
    {{.name = "avx512", .isa = Isa::avx512, .applies = is_f32, .fn = unscale_f32_avx512},
     {.name = "openmp", .fn = unscale_and_check_cpu<true>},
     {.name = "scalar", .fn = unscale_and_check_cpu<false>, .fallback = true}});

Kernel<CountFp16FlushableFn> count_fp16_flushable(
    "count_fp16_flushable",
    {{.name = "scalar", .fn = count_fp16_flushable_cpu, .fallback = true}});

}  // namespace mixp::kernels
