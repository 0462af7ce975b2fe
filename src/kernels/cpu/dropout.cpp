// The CPU candidates of kernels/dropout.h: blocks of Philox words and values split over the
// threads, and the fallback, one element at a time in double.
#include "kernels/dropout.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

bool kept(uint32_t word, double p) { return double(word >> 8) * 0x1p-24 >= p; }

template <typename T>
void mask_blocks(const T* in, T* out, int64_t n, const PhiloxState& rng, double p) {
  using C = Compute<T>;
  const C scale = C(1.0 / (1.0 - p));
  parallel_for(n, 16 * kBlock, [&](int64_t begin, int64_t end) {
    C x[kBlock];
    uint32_t words[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      philox_words(rng, uint64_t(i), words, uint64_t(len));
      widen(in + i, len, x);
      for (int64_t j = 0; j < len; ++j) x[j] = kept(words[j], p) ? x[j] * scale : C(0);
      narrow(x, len, out + i);
    }
  });
}

template <typename T>
void mask_each(const T* in, T* out, int64_t n, const PhiloxState& rng, double p) {
  const double scale = 1.0 / (1.0 - p);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = kept(philox_word(rng, uint64_t(i)), p);
    out[i] = from_double<T>(keep ? to_double(in[i]) * scale : 0.0);
  }
}

template <bool Fallback>
void dropout_mask_cpu(const Tensor& in, Tensor& out, const PhiloxState& rng, double p) {
  visit_floating(in.dtype(), "dropout", [&]<typename T>() {
    if constexpr (Fallback) {
      mask_each(in.data<T>(), out.data<T>(), in.numel(), rng, p);
    } else {
      mask_blocks(in.data<T>(), out.data<T>(), in.numel(), rng, p);
    }
  });
}

}  // namespace

Kernel<DropoutMaskFn> dropout_mask(
    "dropout_mask", {{.name = "openmp", .fn = dropout_mask_cpu<false>},
                     {.name = "scalar", .fn = dropout_mask_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
