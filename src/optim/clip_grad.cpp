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

static_assert(kGradNormChunk == 16 * kernels::kBlock, "whole blocks per chunk");

// Sum of squares of each fixed chunk of one gradient in Acc, in chunk order: the result does not
// depend on the thread count.
template <typename Acc>
std::vector<Acc> chunk_sums(const Tensor& g) {
  const int64_t n = g.numel();
  const int64_t chunks = (n + kGradNormChunk - 1) / kGradNormChunk;
  std::vector<Acc> partial(static_cast<size_t>(chunks), Acc(0));
  kernels::parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    Acc x[kernels::kBlock];
    for (int64_t c = begin; c < end; ++c) {
      const int64_t stop = std::min(n, (c + 1) * kGradNormChunk);
      Acc sum = 0;
      for (int64_t i = c * kGradNormChunk; i < stop; i += kernels::kBlock) {
        const int64_t len = std::min(kernels::kBlock, stop - i);
        detail::load_block(g, i, len, x);
        Acc block = 0;
        for (int64_t j = 0; j < len; ++j) block += x[j] * x[j];
        sum += block;
      }
      partial[size_t(c)] = sum;
    }
  });
  return partial;
}

template <typename Acc>
double norm_in(const std::vector<std::vector<double>>& per_gradient) {
  Acc total = 0;
  for (const std::vector<double>& chunks : per_gradient) {
    Acc gradient = 0;
    for (double c : chunks) gradient += Acc(c);
    total += gradient;
  }
  return double(std::sqrt(total));
}

void check_gradient(const Tensor& g) {
  MIXP_CHECK(is_floating(g.dtype()) && g.dtype() != DType::e4m3 && g.dtype() != DType::e5m2,
             "clip_grad_norm: gradients of dtype ", name_of(g.dtype()),
             " are not supported (f32, f64, bf16, f16 are)");
}

template <typename T>
void scale_in_place(Tensor g, double factor) {
  using C = kernels::Compute<T>;
  const C f = C(factor);
  kernels::map1_fast(g.data<T>(), g.data<T>(), g.numel(), [f](C x) { return x * f; });
}

}  // namespace

std::vector<double> chunk_squares(const Tensor& gradient, bool f64) {
  check_gradient(gradient);
  if (f64) return chunk_sums<double>(gradient);
  const std::vector<float> sums = chunk_sums<float>(gradient);
  return {sums.begin(), sums.end()};
}

double norm_from_chunk_squares(const std::vector<std::vector<double>>& per_gradient, bool f64) {
  return f64 ? norm_in<double>(per_gradient) : norm_in<float>(per_gradient);
}

void scale_to_norm(const std::vector<Tensor>& gradients, double norm, double max_norm) {
  if (!std::isfinite(norm)) return;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return;
  NoGradGuard no_grad;
  for (Tensor g : gradients) {
    switch (g.dtype()) {
      case DType::f32: scale_in_place<float>(g, factor); break;
      case DType::f64: scale_in_place<double>(g, factor); break;
      case DType::bf16: scale_in_place<bfloat16>(g, factor); break;
      default: scale_in_place<float16>(g, factor); break;
    }
    ++g.impl()->storage->version;
  }
}

double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm) {
  MIXP_CHECK(max_norm >= 0.0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  std::vector<Tensor> grads;
  bool any_f64 = false;
  for (const Tensor& p : parameters) {
    MIXP_CHECK(p.defined(), "clip_grad_norm: a parameter is undefined");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    check_gradient(g);
    any_f64 = any_f64 || g.dtype() == DType::f64;
    grads.push_back(g);
  }
  std::vector<std::vector<double>> squares;
  for (const Tensor& g : grads) squares.push_back(chunk_squares(g, any_f64));
  const double norm = norm_from_chunk_squares(squares, any_f64);
  scale_to_norm(grads, norm, max_norm);
  return norm;
}

}  // namespace mixp::optim
