#include "ops/gemm_op.h"

#include "kernels/gemm_product.h"
#include "ops/op_helpers.h"

namespace mixp::ops::detail {

void gemm_into(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, Tensor out,
               const Tensor& bias) {
  NoGradGuard no_grad;
  MIXP_ASSERT(out.numel() == s.batch * s.m * s.n, "gemm_into: an output of ", out.numel(),
              " elements for a product of ", s.batch * s.m * s.n);
  kernels::gemm_product(s, a, b, bias, out);
}

Tensor gemm(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, const Shape& out_shape,
            DType out_dtype, const Tensor& bias) {
  Tensor out = empty(out_shape, out_dtype, MemoryTag::activation, a.device());
  gemm_into(s, a, b, out, bias);
  return out;
}

}  // namespace mixp::ops::detail
