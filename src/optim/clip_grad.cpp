#include "mixp/optim/clip_grad.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "optim/update.h"
#include "tensor/tensor_impl.h"

namespace mixp::optim {

namespace {

constexpr int64_t kChunk = 16 * kernels::kBlock;

// Sum of squares of one gradient in Acc. Fixed chunks whose partials are added in chunk order,
// so that the result does not depend on the thread count.
template <typename Acc>
Acc sum_of_squares(const Tensor& g) {
  const int64_t n = g.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<Acc> partial(static_cast<size_t>(chunks), Acc(0));
  kernels::parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    Acc x[kernels::kBlock];
    for (int64_t c = begin; c < end; ++c) {
      const int64_t stop = std::min(n, (c + 1) * kChunk);
      Acc sum = 0;
      for (int64_t i = c * kChunk; i < stop; i += kernels::kBlock) {
        const int64_t len = std::min(kernels::kBlock, stop - i);
        detail::load_block(g, i, len, x);
        Acc block = 0;
        for (int64_t j = 0; j < len; ++j) block += x[j] * x[j];
        sum += block;
      }
      partial[size_t(c)] = sum;
    }
  });
  Acc total = 0;
  for (Acc p : partial) total += p;
  return total;
}

template <typename T>
void scale_in_place(Tensor g, double factor) {
  using C = kernels::Compute<T>;
  const C f = C(factor);
  kernels::map1_fast(g.data<T>(), g.data<T>(), g.numel(), [f](C x) { return x * f; });
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm) {
  MIXP_CHECK(max_norm >= 0.0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  std::vector<Tensor> grads;
  bool any_f64 = false;
  for (const Tensor& p : parameters) {
    MIXP_CHECK(p.defined(), "clip_grad_norm: a parameter is undefined");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    MIXP_CHECK(is_floating(g.dtype()) && g.dtype() != DType::e4m3 && g.dtype() != DType::e5m2,
               "clip_grad_norm: gradients of dtype ", name_of(g.dtype()),
               " are not supported (f32, f64, bf16, f16 are)");
    any_f64 = any_f64 || g.dtype() == DType::f64;
    grads.push_back(g);
  }
  double norm;
  if (any_f64) {
    double total = 0;
    for (const Tensor& g : grads) total += sum_of_squares<double>(g);
    norm = std::sqrt(total);
  } else {
    float total = 0;
    for (const Tensor& g : grads) total += sum_of_squares<float>(g);
    norm = double(std::sqrt(total));
  }
  if (!std::isfinite(norm)) return norm;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return norm;
  NoGradGuard no_grad;
  for (Tensor& g : grads) {
    switch (g.dtype()) {
      case DType::f32: scale_in_place<float>(g, factor); break;
      case DType::f64: scale_in_place<double>(g, factor); break;
      case DType::bf16: scale_in_place<bfloat16>(g, factor); break;
      default: scale_in_place<float16>(g, factor); break;
    }
    ++g.impl()->storage->version;
  }
  return norm;
}

}  // namespace mixp::optim
