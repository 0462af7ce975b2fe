// softmax and log_softmax along one dimension, computed in fp32 (f64 for f64 inputs) with the
// maximum subtracted first; the result has the input's dtype.
// Shape contract: x any shape with ndim >= 1; the result has x's shape.
// Backward: softmax dx = y (g - sum(g y)); log_softmax dx = g - exp(y) sum(g).
#include "kernels/softmax.h"
#include "ops/op_helpers.h"
#include "ops/reduce.h"

namespace mixp::ops {
namespace {

struct SoftmaxBackward : autograd::Node {
  autograd::SavedTensor output;
  int dim = 0;
  bool log = false;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor y = output.get();
    Tensor dx = detail::empty_like(y);
    kernels::softmax_backward_lines(grads[0], y, dx, detail::around(y.shape(), dim), log);
    return {dx};
  }
  void release() override { output.reset(); }
};

Tensor softmax_impl(const char* op, const Tensor& x, int dim_in, bool log) {
  detail::check_floating(op, x);
  MIXP_CHECK(x.ndim() >= 1, op, ": needs at least one dimension, got a scalar");
  const int dim = x.shape().normalize_dim(dim_in, op);
  Tensor y = detail::empty_like(x);
  kernels::softmax_lines(x, y, detail::around(x.shape(), dim), log);
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
