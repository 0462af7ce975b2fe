// The CPU candidates of kernels/grad_norm.h: chunks over the threads, and the fallback, the same
// chunks on one thread (the same bits).
#include "kernels/grad_norm.h"

#include <algorithm>

#include "kernels/cpu/weight_blocks.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

template <bool Parallel, typename Body>
void over_chunks(int64_t n, int64_t chunk, const Body& body) {
  if constexpr (Parallel) {
    parallel_for(n, chunk, body);
  } else {
    for (int64_t begin = 0; begin < n; begin += chunk) body(begin, std::min(n, begin + chunk));
  }
}

template <bool Parallel, typename Acc>
std::vector<double> chunk_sums(const Tensor& g, int64_t chunk) {
  const int64_t n = g.numel();
  std::vector<double> partial(static_cast<size_t>((n + chunk - 1) / chunk), 0.0);
  over_chunks<Parallel>(n, chunk, [&](int64_t begin, int64_t end) {
    Acc x[kBlock];
    Acc sum = 0;
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      cpu::load_block(g, i, len, x);
      Acc block = 0;
      for (int64_t j = 0; j < len; ++j) block += x[j] * x[j];
      sum += block;
    }
    partial[size_t(begin / chunk)] = double(sum);
  });
  return partial;
}

template <bool Parallel>
std::vector<double> grad_chunk_squares_cpu(const Tensor& g, int64_t chunk, bool f64) {
  const DType d = g.dtype();
  MIXP_CHECK(d == DType::f32 || d == DType::f64 || d == DType::bf16 || d == DType::f16,
             "clip_grad_norm: gradients of dtype ", name_of(d),
             " are not supported (f32, f64, bf16, f16 are)");
  MIXP_CHECK(chunk > 0 && chunk % kBlock == 0, "grad_chunk_squares: a chunk of ", chunk,
             " elements is not a positive multiple of ", kBlock);
  return f64 ? chunk_sums<Parallel, double>(g, chunk) : chunk_sums<Parallel, float>(g, chunk);
}

template <bool Parallel, typename T>
void scale(Tensor& g, double factor) {
  using C = Compute<T>;
  const C f = C(factor);
  T* p = g.data<T>();
  over_chunks<Parallel>(g.numel(), 16 * kBlock, [&](int64_t begin, int64_t end) {
    C x[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      widen(p + i, len, x);
      for (int64_t j = 0; j < len; ++j) x[j] = x[j] * f;
      narrow(x, len, p + i);
    }
  });
}

template <bool Parallel>
void scale_gradient_cpu(Tensor& g, double factor) {
  switch (g.dtype()) {
    case DType::f32: return scale<Parallel, float>(g, factor);
    case DType::f64: return scale<Parallel, double>(g, factor);
    case DType::bf16: return scale<Parallel, bfloat16>(g, factor);
    case DType::f16: return scale<Parallel, float16>(g, factor);
    default: break;
  }
  MIXP_CHECK(false, "clip_grad_norm: gradients of dtype ", name_of(g.dtype()),
             " are not supported (f32, f64, bf16, f16 are)");
}

}  // namespace

Kernel<GradChunkSquaresFn> grad_chunk_squares(
    "grad_chunk_squares", {{.name = "openmp", .fn = grad_chunk_squares_cpu<true>},
                           {.name = "scalar", .fn = grad_chunk_squares_cpu<false>,
                            .fallback = true}});

Kernel<ScaleGradientFn> scale_gradient(
    "scale_gradient", {{.name = "openmp", .fn = scale_gradient_cpu<true>},
                       {.name = "scalar", .fn = scale_gradient_cpu<false>, .fallback = true}});

}  // namespace mixp::kernels
