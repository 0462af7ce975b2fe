#include "mixp/optim/clip_grad.h"

#include <cmath>
#include <vector>

#include "kernels/grad_norm.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "tensor/tensor_impl.h"

namespace mixp::optim {

namespace {

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

}  // namespace

std::vector<double> chunk_squares(const Tensor& gradient, bool f64) {
  check_gradient(gradient);
  return kernels::grad_chunk_squares(gradient, kGradNormChunk, f64);
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
    kernels::scale_gradient(g, factor);
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
