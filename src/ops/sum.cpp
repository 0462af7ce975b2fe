// sum and mean: out = scale * sum of x over dims (scale 1, or 1/count for mean).
// Shape contract: x any shape; dims any subset (all when empty), negative allowed; the result
// drops the reduced dims (keepdim: keeps them as 1). Accumulates in fp32 (f64 for f64) and
// rounds once to x's dtype. Backward: dx = scale * g broadcast back to x's shape.
#include <algorithm>

#include "kernels/sum.h"
#include "ops/op_helpers.h"
#include "ops/reduce.h"

namespace mixp::ops {
namespace detail {

std::vector<int> reduction_dims(const char* op, const Tensor& x, const std::vector<int>& dims) {
  std::vector<int> out;
  if (dims.empty()) {
    for (int d = 0; d < x.ndim(); ++d) out.push_back(d);
    return out;
  }
  for (int d : dims) out.push_back(x.shape().normalize_dim(d, op));
  std::sort(out.begin(), out.end());
  MIXP_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op,
             ": a dimension is repeated in the reduction over shape ", x.shape().to_string());
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int>& dims, bool keepdim) {
  std::vector<int64_t> out;
  for (int d = 0; d < shape.ndim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return Shape(out);
}

Around around(const Shape& shape, int dim) {
  Around a{.outer = 1, .n = shape[dim], .inner = 1};
  for (int d = 0; d < dim; ++d) a.outer *= shape[d];
  for (int d = dim + 1; d < shape.ndim(); ++d) a.inner *= shape[d];
  return a;
}

Tensor sum_kernel(const Tensor& x, const std::vector<int>& dims, double scale) {
  const Shape kept = reduced_shape(x.shape(), dims, /*keepdim=*/true);
  const bool contiguous_range = dims.empty() || dims.back() - dims.front() + 1 == int(dims.size());
  if (contiguous_range) {
    // One pass over [outer, n, inner] with n the product of the reduced dims.
    Around a{.outer = 1, .n = 1, .inner = 1};
    for (int d = 0; d < x.ndim(); ++d) {
      if (dims.empty() || d < dims.front())
        a.outer *= x.shape()[d];
      else if (d <= dims.back())
        a.n *= x.shape()[d];
      else
        a.inner *= x.shape()[d];
    }
    if (dims.empty()) a = {.outer = 1, .n = 1, .inner = 1};
    Tensor out = empty(kept, x.dtype(), MemoryTag::activation, x.device());
    kernels::sum_lines(x, a, scale, out);
    return out;
  }
  // Several separate ranges: reduce one dim at a time in fp32 (f64 for f64), round at the end.
  const DType wide = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor current = x.to(wide).detach();
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    const Around a = around(current.shape(), *it);
    Shape s = current.shape();
    s[*it] = 1;
    Tensor next = empty(s, wide, MemoryTag::activation, x.device());
    const double step_scale = it + 1 == dims.rend() ? scale : 1.0;
    kernels::sum_lines(current, a, step_scale, next);
    current = next;
  }
  return current.to(x.dtype()).detach();
}

}  // namespace detail

namespace {

struct SumBackward : autograd::Node {
  Shape input_shape, kept_shape;
  double scale = 1.0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = detail::expand(grads[0].view(kept_shape), input_shape);
    return {scale == 1.0 ? g : ops::mul_scalar(g, scale)};
  }
};

Tensor reduce(const char* op, const Tensor& x, const std::vector<int>& dims_in, bool keepdim,
              bool mean) {
  detail::check_floating(op, x);
  const std::vector<int> dims = detail::reduction_dims(op, x, dims_in);
  int64_t count = 1;
  for (int d : dims) count *= x.shape()[d];
  MIXP_CHECK(!mean || count > 0, op, ": the mean of no elements (shape ", x.shape().to_string(),
             ")");
  const double scale = mean ? 1.0 / double(count) : 1.0;
  Tensor kept = detail::sum_kernel(x, dims, scale);
  Tensor out = kept.view(detail::reduced_shape(x.shape(), dims, keepdim)).detach();
  if (auto node = autograd::make_node<SumBackward>(op, {&x})) {
    node->input_shape = x.shape();
    node->kept_shape = kept.shape();
    node->scale = scale;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, std::vector<int> dims, bool keepdim) {
  const auto cast = amp::autocast_inputs(OpKind::sum, {&x});
  return cast.output(reduce("sum", cast[0], dims, keepdim, false));
}

Tensor mean(const Tensor& x, std::vector<int> dims, bool keepdim) {
  const auto cast = amp::autocast_inputs(OpKind::mean, {&x});
  return cast.output(reduce("mean", cast[0], dims, keepdim, true));
}

}  // namespace mixp::ops
