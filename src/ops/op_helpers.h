// Shared machinery of the ops: argument checks, broadcasting, and the generic elementwise ops
// that run an op's kernels (kernels/elementwise_ops.h) and record its backward.
// Private to mixp.
#pragma once

#include <vector>

#include "autograd/autocast_internal.h"
#include "autograd/engine.h"
#include "kernels/elementwise_candidates.h"
#include "mixp/amp/autocast.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "tensor/element.h"

namespace mixp::ops::detail {

/// Throws unless `t` is a defined f32, f64, f16 or bf16 tensor.
void check_floating(const char* op, const Tensor& t, const char* what = "input");
/// Throws unless a and b have the same dtype.
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
/// The NumPy broadcast of two shapes; throws naming the op and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
/// `t` materialized at the broadcast shape `shape`.
Tensor expand(const Tensor& t, const Shape& shape);
/// Sums `g` down to `shape` (the inverse of broadcasting), accumulating in fp32.
Tensor sum_to(const Tensor& g, const Shape& shape);
/// A new tensor of t's shape and dtype.
Tensor empty_like(const Tensor& t);

/// The dtype statistics and accumulators are kept in: fp32, or f64 for f64 data.
inline DType accumulation_dtype(DType d) { return d == DType::f64 ? DType::f64 : DType::f32; }

/// Copies positions [src_start, src_start + length) of dimension `dim` of `src` to positions
/// [dst_start, dst_start + length) of the same dimension of `dst`: a byte copy (any dtype, the
/// same in both), in parallel. Every other dimension must have the same size in both.
void copy_along(const Tensor& src, int64_t src_start, Tensor& dst, int64_t dst_start, int dim,
                int64_t length);

// ---- the generic unary op: its functor (kernels/elementwise_candidates.h) gives the name, what
// the backward keeps, and the scalar if any; its kernels (kernels/elementwise_ops.h) compute ----
using kernels::Saved;

template <typename Op>
struct UnaryBackward : autograd::Node {
  Op op;
  const kernels::UnaryBackwardKernel<Op>* kernel = nullptr;
  autograd::SavedTensor saved;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor dx = empty_like(g);
    const Tensor kept = Op::saved == Saved::nothing ? g : saved.get();
    if constexpr (kernels::ScalarOp<Op>) {
      (*kernel)(g, kept, op.scalar, dx);
    } else {
      (*kernel)(g, kept, dx);
    }
    return {dx};
  }
  void release() override { saved.reset(); }
};

template <typename Op>
Tensor unary(const Tensor& x, const Op& op, const kernels::UnaryForwardKernel<Op>& forward,
             const kernels::UnaryBackwardKernel<Op>& backward) {
  check_floating(Op::name, x);
  Tensor y = empty(x.shape(), x.dtype(), MemoryTag::activation, x.device());
  if constexpr (kernels::ScalarOp<Op>) {
    forward(x, op.scalar, y);
  } else {
    forward(x, y);
  }
  if (auto node = autograd::make_node<UnaryBackward<Op>>(Op::name, {&x})) {
    node->op = op;
    node->kernel = &backward;
    if constexpr (Op::saved != Saved::nothing) {
      node->saved = autograd::SavedTensor(Op::saved == Saved::output ? y : x);
    }
    autograd::set_history(y, node);
  }
  return y;
}

// ---- the generic binary op, with broadcasting ----
// Op (kernels/elementwise_candidates.h) may also have static constexpr bool passes_gradient[2]:
// true where grad_a (or grad_b) is g itself, so that backward hands g on (summed to the input's
// shape) instead of running a kernel; an op whose gradients all pass g has no backward kernel.

template <typename Op>
constexpr bool passes_gradient(int which) {
  if constexpr (requires { Op::passes_gradient[0]; }) {
    return Op::passes_gradient[which];
  } else {
    return false;
  }
}

template <typename Op>
struct BinaryBackward : autograd::Node {
  const kernels::Kernel<kernels::BinaryBackwardFn>* kernel = nullptr;
  autograd::SavedTensor a, b;
  Shape a_shape, b_shape, out_shape;
  DType a_dtype = DType::f32, b_dtype = DType::f32;  // the gradients' dtypes
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release() override {
    a.reset();
    b.reset();
  }
};

/// widening: the op accepts an fp32 and a bf16 or f16 input of one shape, as autocast's promote
/// rule hands them to add and sub (OpInfo::fp32_inside), and returns fp32. `backward` is null
/// when both gradients pass g on.
template <typename Op>
Tensor binary(const Tensor& a, const Tensor& b, const Op& /*op: its type names the functor*/,
              const kernels::Kernel<kernels::BinaryFn>& forward,
              const kernels::Kernel<kernels::BinaryBackwardFn>* backward, bool widening = false) {
  check_floating(Op::name, a, "first input");
  check_floating(Op::name, b, "second input");
  const bool mixed = widening && a.dtype() != b.dtype() && amp::detail::reads_mixed_inputs(a, b);
  if (!mixed) check_same_dtype(Op::name, a, b);
  const Shape shape = broadcast_shapes(Op::name, a.shape(), b.shape());
  Tensor out = empty(shape, mixed ? DType::f32 : a.dtype(), MemoryTag::activation, a.device());
  forward(a, b, out);
  if (auto node = autograd::make_node<BinaryBackward<Op>>(Op::name, {&a, &b})) {
    MIXP_ASSERT(backward != nullptr || (passes_gradient<Op>(0) && passes_gradient<Op>(1)));
    node->kernel = backward;
    if constexpr (Op::needs_inputs) {
      node->a = autograd::SavedTensor(a);
      node->b = autograd::SavedTensor(b);
    }
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    node->out_shape = shape;
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    autograd::set_history(out, node);
  }
  return out;
}

template <typename Op>
std::vector<Tensor> BinaryBackward<Op>::apply(std::vector<Tensor>&& grads) {
  const Tensor& g = grads[0];
  Tensor av, bv;
  if constexpr (Op::needs_inputs) {
    av = expand(a.get(), out_shape);
    bv = expand(b.get(), out_shape);
  }
  std::vector<Tensor> result(2);
  for (int which = 0; which < 2; ++which) {
    if (!next[size_t(which)].node) continue;
    // Each input's gradient in its dtype: an fp32 g rounds once for a bf16 or f16 input that
    // the op read widened, as it would through autocast's cast.
    auto in_input_dtype = [&](Tensor t) {
      const DType dtype = which == 0 ? a_dtype : b_dtype;
      if (t.dtype() == dtype) return t;
      NoGradGuard no_grad;
      return t.to(dtype).detach();
    };
    if (passes_gradient<Op>(which)) {  // gradients are never changed in place, so g is shared
      result[size_t(which)] = in_input_dtype(sum_to(g, which == 0 ? a_shape : b_shape));
      continue;
    }
    Tensor d = empty_like(g);
    (*kernel)(g, av, bv, static_cast<kernels::Operand>(which), d);
    result[size_t(which)] = in_input_dtype(sum_to(d, which == 0 ? a_shape : b_shape));
  }
  return result;
}

}  // namespace mixp::ops::detail
