// softmax and log_softmax along one dimension, computed in fp32 (f64 for f64 inputs) with the
// maximum subtracted first; the result has the input's dtype.
// Shape contract: x any shape with ndim >= 1; the result has x's shape.
// Backward: softmax dx = y (g - sum(g y)); log_softmax dx = g - exp(y) sum(g).
#include <cmath>

#include "ops/op_helpers.h"
#include "ops/reduce.h"

namespace mixp::ops {
namespace {

// For each [outer, inner] position, `line` gets a strided view of the n values along dim.
template <typename Body>
void for_each_line(detail::Around a, bool parallel, Body body) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t o = p / a.inner, i = p % a.inner;
      body(o * a.n * a.inner + i);
    }
  };
  if (parallel) {
    kernels::parallel_for(a.outer * a.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(a.n, 1)),
                          run);
  } else {
    run(0, a.outer * a.inner);
  }
}

template <typename T, typename Acc>
void softmax_lines(const T* x, T* y, detail::Around a, bool log, bool parallel) {
  for_each_line(a, parallel, [&](int64_t base) {
    const int64_t s = a.inner;
    Acc m = Acc(kernels::to_double(x[base]));
    for (int64_t k = 1; k < a.n; ++k) m = std::max(m, Acc(kernels::to_double(x[base + k * s])));
    Acc total = 0;
    for (int64_t k = 0; k < a.n; ++k)
      total += std::exp(Acc(kernels::to_double(x[base + k * s])) - m);
    const Acc log_total = std::log(total);
    for (int64_t k = 0; k < a.n; ++k) {
      const Acc v = Acc(kernels::to_double(x[base + k * s])) - m;
      y[base + k * s] = kernels::from_double<T>(double(log ? v - log_total : std::exp(v) / total));
    }
  });
}

template <typename T, typename Acc>
void softmax_backward_lines(const T* g, const T* y, T* dx, detail::Around a, bool log,
                            bool parallel) {
  for_each_line(a, parallel, [&](int64_t base) {
    const int64_t s = a.inner;
    Acc dot = 0;
    for (int64_t k = 0; k < a.n; ++k) {
      const Acc gk = Acc(kernels::to_double(g[base + k * s]));
      dot += log ? gk : gk * Acc(kernels::to_double(y[base + k * s]));
    }
    for (int64_t k = 0; k < a.n; ++k) {
      const Acc gk = Acc(kernels::to_double(g[base + k * s]));
      const Acc yk = Acc(kernels::to_double(y[base + k * s]));
      dx[base + k * s] =
          kernels::from_double<T>(double(log ? gk - std::exp(yk) * dot : yk * (gk - dot)));
    }
  });
}

struct SoftmaxBackward : autograd::Node {
  autograd::SavedTensor output;
  int dim = 0;
  bool log = false;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor y = output.get();
    Tensor dx = detail::empty_like(y);
    const detail::Around a = detail::around(y.shape(), dim);
    visit_floating(y.dtype(), name, [&]<typename T>() {
      if (reference_mode()) {
        softmax_backward_lines<T, double>(grads[0].data<T>(), y.data<T>(), dx.data<T>(), a, log,
                                          false);
      } else {
        softmax_backward_lines<T, kernels::Compute<T>>(grads[0].data<T>(), y.data<T>(),
                                                       dx.data<T>(), a, log, true);
      }
    });
    return {dx};
  }
  void release() override { output.reset(); }
};

Tensor softmax_impl(const char* op, const Tensor& x, int dim_in, bool log) {
  detail::check_floating(op, x);
  MIXP_CHECK(x.ndim() >= 1, op, ": needs at least one dimension, got a scalar");
  const int dim = x.shape().normalize_dim(dim_in, op);
  Tensor y = detail::empty_like(x);
  const detail::Around a = detail::around(x.shape(), dim);
  visit_floating(x.dtype(), op, [&]<typename T>() {
    if (reference_mode()) {
      softmax_lines<T, double>(x.data<T>(), y.data<T>(), a, log, false);
    } else {
      softmax_lines<T, kernels::Compute<T>>(x.data<T>(), y.data<T>(), a, log, true);
    }
  });
  if (auto node = autograd::make_node<SoftmaxBackward>(op, {&x})) {
    node->output = autograd::SavedTensor(y);
    node->dim = dim;
    node->log = log;
    autograd::set_history(y, node);
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int dim) {
  const auto cast = amp::autocast_inputs(OpKind::softmax, {&x});
  return cast.output(softmax_impl("softmax", cast[0], dim, false));
}

Tensor log_softmax(const Tensor& x, int dim) {
  const auto cast = amp::autocast_inputs(OpKind::log_softmax, {&x});
  return cast.output(softmax_impl("log_softmax", cast[0], dim, true));
}

}  // namespace mixp::ops
