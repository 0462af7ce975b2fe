// max and argmax along one dimension. A NaN is the maximum (it propagates); among equal values
// the first position wins, and the gradient goes there alone.
// Shape contract: x any shape with ndim >= 1; dim in range; the result drops dim (keepdim:
// keeps it as 1). max keeps x's dtype; argmax is i64.
#include <cmath>

#include "ops/op_helpers.h"
#include "ops/reduce.h"

namespace mixp::ops {
namespace {

// Index (along the middle dim) of the maximum of each [outer, inner] position.
template <typename T>
void argmax_middle(const T* x, detail::Around a, int64_t* index) {
  kernels::parallel_for(a.outer * a.inner, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t o = p / a.inner, i = p % a.inner;
      const T* base = x + o * a.n * a.inner + i;
      int64_t best = 0;
      double best_value = kernels::to_double(base[0]);
      for (int64_t k = 1; k < a.n && !std::isnan(best_value); ++k) {
        const double v = kernels::to_double(base[k * a.inner]);
        if (v > best_value || std::isnan(v)) {
          best = k;
          best_value = v;
        }
      }
      index[p] = best;
    }
  });
}

Tensor argmax_kept(const char* op, const Tensor& x, int dim) {
  MIXP_CHECK(x.shape()[dim] > 0, op, ": dimension ", dim, " of shape ", x.shape().to_string(),
             " is empty");
  Shape kept = x.shape();
  kept[dim] = 1;
  Tensor index = empty(kept, DType::i64);
  const detail::Around a = detail::around(x.shape(), dim);
  visit_floating(x.dtype(), op,
                 [&]<typename T>() { argmax_middle<T>(x.data<T>(), a, index.data<int64_t>()); });
  return index;
}

struct MaxBackward : autograd::Node {
  Shape input_shape;
  int dim = 0;
  Tensor index;  // kept shape, i64
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = grads[0];
    Tensor dx = zeros(input_shape, g.dtype());
    const detail::Around a = detail::around(input_shape, dim);
    const int64_t* idx = index.data<int64_t>();
    const size_t size = size_t(size_of(g.dtype()));
    const char* src = static_cast<const char*>(g.raw_data());
    char* dst = static_cast<char*>(dx.raw_data());
    for (int64_t p = 0; p < a.outer * a.inner; ++p) {
      const int64_t o = p / a.inner, i = p % a.inner;
      const int64_t target = (o * a.n + idx[p]) * a.inner + i;
      std::memcpy(dst + size_t(target) * size, src + size_t(p) * size, size);
    }
    return {dx};
  }
  void release() override { index = Tensor(); }
};

}  // namespace

Tensor argmax(const Tensor& x, int dim_in, bool keepdim) {
  detail::check_floating("argmax", x);
  const int dim = x.shape().normalize_dim(dim_in, "argmax");
  Tensor index = argmax_kept("argmax", x, dim);
  return index.view(detail::reduced_shape(x.shape(), {dim}, keepdim)).detach();
}

Tensor max(const Tensor& x_in, int dim_in, bool keepdim) {
  const auto cast = amp::autocast_inputs(OpKind::max, {&x_in});
  const Tensor& x = cast[0];
  detail::check_floating("max", x);
  const int dim = x.shape().normalize_dim(dim_in, "max");
  Tensor index = argmax_kept("max", x, dim);
  Shape kept = x.shape();
  kept[dim] = 1;
  Tensor values = empty(kept, x.dtype());
  const detail::Around a = detail::around(x.shape(), dim);
  const int64_t* idx = index.data<int64_t>();
  const size_t size = size_t(size_of(x.dtype()));
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(values.raw_data());
  for (int64_t p = 0; p < a.outer * a.inner; ++p) {
    const int64_t o = p / a.inner, i = p % a.inner;
    std::memcpy(dst + size_t(p) * size, src + size_t((o * a.n + idx[p]) * a.inner + i) * size,
                size);
  }
  Tensor out = values.view(detail::reduced_shape(x.shape(), {dim}, keepdim)).detach();
  if (auto node = autograd::make_node<MaxBackward>("max", {&x})) {
    node->input_shape = x.shape();
    node->dim = dim;
    node->index = index;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
