// The product behind matmul, bmm and linear, outside autograd: kernels/gemm_product.h (which
// widens where the CPU has no native bf16, adds a bias in fp32 and rounds once to the output
// dtype) into a new or a given tensor. Private to mixp.
#pragma once

#include "kernels/gemm.h"
#include "mixp/tensor.h"

namespace mixp::ops::detail {

/// op(a) op(b) per s, as a tensor of `out_shape` and `out_dtype`; bias (if defined) is added
/// to every row before rounding. Not recorded by autograd.
Tensor gemm(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, const Shape& out_shape,
            DType out_dtype, const Tensor& bias = Tensor());

/// As gemm, into `out`: contiguous (a slice of a larger result, say), holding batch x m x n
/// elements of any floating dtype. f64 outputs take f64 inputs.
void gemm_into(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, Tensor out,
               const Tensor& bias = Tensor());

}  // namespace mixp::ops::detail
