// The kernels of the elementwise ops, one per op and direction, each a Kernel that a device
// adds its own candidate to. Private to mixp.
//
// The cpu candidates of each are generated from the op's functor (src/ops/<op>.cpp) by the
// templates of kernels/elementwise_candidates.h, and defined in the op's file next to the
// functor: the fastest kernel the op has (bf16 lanes, fp32 blocks), the per-element map over
// the threads, and the fallback, one element at a time in double, rounded once.
//
// Contracts, for every device:
//   unary      y = f(x): x and y of one shape and one floating dtype (f32, f64, f16, bf16),
//              computed in fp32 (double for f64; the fallback in double), rounded once.
//   backward   dx = f'(g, saved): g, saved and dx of one shape and dtype; saved is the op's
//              input or output (see the op), or g again for ops whose gradient needs neither.
//   scalar     as unary, with the op's scalar (add_scalar, mul_scalar, pow).
//   binary     out = f(a, b): a and b broadcast (NumPy rules) to out's shape, all three of one
//              dtype; or, for the widening ops (add, sub, mul, div under autocast), one of a and
//              b fp32 and the other bf16 or f16, both of out's shape, and out fp32.
//   binary backward  d = the gradient for operand `which`, from g and the inputs a and b
//              expanded to g's shape (undefined for ops whose gradients depend on g alone); d
//              has g's shape and dtype.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

using UnaryFn = void(const Tensor& x, Tensor& y);
using UnaryBackwardFn = void(const Tensor& g, const Tensor& saved, Tensor& dx);
using ScalarUnaryFn = void(const Tensor& x, double scalar, Tensor& y);
using ScalarUnaryBackwardFn = void(const Tensor& g, const Tensor& saved, double scalar, Tensor& dx);
using BinaryFn = void(const Tensor& a, const Tensor& b, Tensor& out);

/// Which input of a binary op a gradient is for.
enum class Operand : uint8_t { a = 0, b = 1 };
using BinaryBackwardFn = void(const Tensor& g, const Tensor& a, const Tensor& b, Operand which,
                              Tensor& d);

// ---- unary ops ----
extern Kernel<UnaryFn> relu_forward;
extern Kernel<UnaryBackwardFn> relu_backward;
extern Kernel<UnaryFn> exp_forward;
extern Kernel<UnaryBackwardFn> exp_backward;
extern Kernel<UnaryFn> log_forward;
extern Kernel<UnaryBackwardFn> log_backward;
extern Kernel<UnaryFn> sqrt_forward;
extern Kernel<UnaryBackwardFn> sqrt_backward;
extern Kernel<UnaryFn> rsqrt_forward;
extern Kernel<UnaryBackwardFn> rsqrt_backward;
extern Kernel<UnaryFn> neg_forward;
extern Kernel<UnaryBackwardFn> neg_backward;
extern Kernel<UnaryFn> tanh_forward;
extern Kernel<UnaryBackwardFn> tanh_backward;
extern Kernel<UnaryFn> sigmoid_forward;
extern Kernel<UnaryBackwardFn> sigmoid_backward;
extern Kernel<UnaryFn> gelu_forward;
extern Kernel<UnaryBackwardFn> gelu_backward;
extern Kernel<UnaryFn> gelu_tanh_forward;
extern Kernel<UnaryBackwardFn> gelu_tanh_backward;
extern Kernel<UnaryFn> silu_forward;
extern Kernel<UnaryBackwardFn> silu_backward;

// ---- unary ops with a scalar ----
extern Kernel<ScalarUnaryFn> add_scalar_forward;
extern Kernel<ScalarUnaryBackwardFn> add_scalar_backward;
extern Kernel<ScalarUnaryFn> mul_scalar_forward;
extern Kernel<ScalarUnaryBackwardFn> mul_scalar_backward;
extern Kernel<ScalarUnaryFn> pow_scalar_forward;
extern Kernel<ScalarUnaryBackwardFn> pow_scalar_backward;

// ---- binary ops; add's gradients are g itself (summed to each input's shape), and sub's
// first one too, so they have no kernel for them ----
extern Kernel<BinaryFn> add_forward;
extern Kernel<BinaryFn> sub_forward;
extern Kernel<BinaryBackwardFn> sub_backward;
extern Kernel<BinaryFn> mul_forward;
extern Kernel<BinaryBackwardFn> mul_backward;
extern Kernel<BinaryFn> div_forward;
extern Kernel<BinaryBackwardFn> div_backward;

}  // namespace mixp::kernels
