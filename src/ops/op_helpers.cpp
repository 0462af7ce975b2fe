#include "ops/op_helpers.h"

#include <algorithm>

#include "kernels/copy_along.h"
#include "kernels/expand.h"
#include "tensor/tensor_impl.h"

namespace mixp::ops::detail {

void check_floating(const char* op, const Tensor& t, const char* what) {
  MIXP_CHECK(t.defined(), op, ": the ", what, " is undefined");
  const DType d = t.dtype();
  MIXP_CHECK(d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16, op,
             ": the ", what, " has dtype ", name_of(d), " (shape ", t.shape().to_string(),
             "); ops compute on f32, f64, f16 and bf16 (convert FP8 with to() first)");
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  MIXP_CHECK(a.dtype() == b.dtype(), op, ": inputs have different dtypes, ", name_of(a.dtype()),
             " ", a.shape().to_string(), " and ", name_of(b.dtype()), " ", b.shape().to_string(),
             "; convert one with to(), or use autocast");
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const int nd = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) {
    const int ia = a.ndim() - nd + i, ib = b.ndim() - nd + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    MIXP_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a.to_string(), " and ",
               b.to_string(), " do not broadcast (dimension ", i, ": ", da, " vs ", db, ")");
    dims[size_t(i)] = da == 1 ? db : da;
  }
  return Shape(dims);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  Tensor out = empty(shape, t.dtype(), MemoryTag::activation, t.device());
  kernels::expand(t, out);
  return out;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  std::vector<int> dims;
  const int lead = g.ndim() - shape.ndim();
  for (int d = 0; d < g.ndim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  }
  Tensor s;
  {
    NoGradGuard no_grad;
    s = ops::sum(g, dims, /*keepdim=*/true);
  }
  return s.view(shape).detach();
}

Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), t.dtype(), MemoryTag::activation, t.device());
}

void copy_along(const Tensor& src, int64_t src_start, Tensor& dst, int64_t dst_start, int dim,
                int64_t length) {
  MIXP_ASSERT(src.dtype() == dst.dtype() && src.ndim() == dst.ndim());
  MIXP_ASSERT(src_start >= 0 && dst_start >= 0 && length >= 0 &&
              src_start + length <= src.shape()[dim] && dst_start + length <= dst.shape()[dim]);
  kernels::copy_along(src, src_start, dst, dst_start, dim, length);
}

}  // namespace mixp::ops::detail
