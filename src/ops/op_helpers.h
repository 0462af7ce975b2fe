// Shared machinery of the ops: argument checks, broadcasting, and the generic elementwise op
// that runs an op functor on the fast or the reference kernel and records its backward.
// Private to mixp.
#pragma once

#include <vector>

#include "autograd/autocast_internal.h"
#include "autograd/engine.h"
#include "kernels/elementwise.h"
#include "kernels/vmath.h"
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

// ---- the generic unary op ----
// Op has: const char* name; Saved saved; template <C> C forward(C x) const;
// template <C> C backward(C grad, C saved) const, with saved the input, the output, or (for
// Saved::nothing) the gradient again.
enum class Saved { input, output, nothing };

template <typename Op>
struct UnaryBackward : autograd::Node {
  Op op;
  autograd::SavedTensor saved;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release() override { saved.reset(); }
};

template <typename T, typename F>
void run_map1(const Tensor& in, Tensor& out, const F& f) {
  const int64_t n = in.numel();
  if (reference_mode()) {
    kernels::map1_reference(in.data<T>(), out.data<T>(), n, f);
  } else {
    kernels::map1_fast(in.data<T>(), out.data<T>(), n, f);
  }
}

template <typename T, typename F>
void run_map2(const Tensor& a, const Tensor& b, Tensor& out, const F& f) {
  const int64_t n = a.numel();
  if (reference_mode()) {
    kernels::map2_reference(a.data<T>(), b.data<T>(), out.data<T>(), n, f);
  } else {
    kernels::map2_fast(a.data<T>(), b.data<T>(), out.data<T>(), n, f);
  }
}

template <typename T, typename F>
void run_map3(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out, const F& f) {
  const int64_t n = a.numel();
  if (reference_mode()) {
    kernels::map3_reference(a.data<T>(), b.data<T>(), c.data<T>(), out.data<T>(), n, f);
  } else {
    kernels::map3_fast(a.data<T>(), b.data<T>(), c.data<T>(), out.data<T>(), n, f);
  }
}

/// Ops with vectorized fp32 kernels also have static forward_block(const float* x, float* y,
/// n) and backward_block(const float* g, const float* saved, float* dx, n); the fast path of
/// every dtype but f64 runs them, the reference path keeps the per-element double formulas.
template <typename Op>
concept HasBlockKernels = requires(const float* c, float* m, int64_t n) {
  Op::forward_block(c, m, n);
  Op::backward_block(c, c, m, n);
};

/// Ops may also have static forward_bf16(const uint16_t* x, uint16_t* y, n) and
/// backward_bf16(const uint16_t* g, const uint16_t* saved, uint16_t* dx, n): the block kernels
/// on bf16 bits, with the same bits as widening, the fp32 block kernel and rounding, in one
/// pass. bf16 tensors take them on the fast path.
template <typename Op>
concept HasBf16Kernels = requires(const uint16_t* c, uint16_t* m, int64_t n) {
  Op::forward_bf16(c, m, n);
  Op::backward_bf16(c, c, m, n);
};

template <typename Op>
Tensor unary(const Tensor& x, const Op& op) {
  check_floating(op.name, x);
  Tensor y = empty(x.shape(), x.dtype(), MemoryTag::activation, x.device());
  visit_floating(x.dtype(), op.name, [&]<typename T>() {
    if constexpr (HasBf16Kernels<Op> && std::is_same_v<T, bfloat16>) {
      if (!reference_mode()) {
        const auto* in = reinterpret_cast<const uint16_t*>(x.data<T>());
        auto* out = reinterpret_cast<uint16_t*>(y.data<T>());
        kernels::parallel_for(x.numel(), 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
          Op::forward_bf16(in + begin, out + begin, end - begin);
        });
        return;
      }
    }
    if constexpr (HasBlockKernels<Op> && !std::is_same_v<T, double>) {
      if (!reference_mode()) {
        kernels::map1_block_fast(x.data<T>(), y.data<T>(), x.numel(), Op::forward_block);
        return;
      }
    }
    run_map1<T>(x, y, [&](auto v) { return op.forward(v); });
  });
  if (auto node = autograd::make_node<UnaryBackward<Op>>(op.name, {&x})) {
    node->op = op;
    if (op.saved != Saved::nothing) {
      node->saved = autograd::SavedTensor(op.saved == Saved::output ? y : x);
    }
    autograd::set_history(y, node);
  }
  return y;
}

template <typename Op>
std::vector<Tensor> UnaryBackward<Op>::apply(std::vector<Tensor>&& grads) {
  const Tensor& g = grads[0];
  Tensor dx = empty_like(g);
  visit_floating(g.dtype(), op.name, [&]<typename T>() {
    if constexpr (HasBf16Kernels<Op> && std::is_same_v<T, bfloat16>) {
      if (!reference_mode() && op.saved != Saved::nothing) {
        const auto* grad = reinterpret_cast<const uint16_t*>(g.data<T>());
        const auto* kept = reinterpret_cast<const uint16_t*>(saved.get().template data<T>());
        auto* out = reinterpret_cast<uint16_t*>(dx.data<T>());
        kernels::parallel_for(g.numel(), 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
          Op::backward_bf16(grad + begin, kept + begin, out + begin, end - begin);
        });
        return;
      }
    }
    if constexpr (HasBlockKernels<Op> && !std::is_same_v<T, double>) {
      if (!reference_mode() && op.saved != Saved::nothing) {
        kernels::map2_block_fast(g.data<T>(), saved.get().template data<T>(), dx.data<T>(),
                                 g.numel(), Op::backward_block);
        return;
      }
    }
    if (op.saved == Saved::nothing) {
      run_map1<T>(g, dx, [&](auto grad) { return op.backward(grad, grad); });
    } else {
      run_map2<T>(g, saved.get(), dx, [&](auto grad, auto v) { return op.backward(grad, v); });
    }
  });
  return {dx};
}

// ---- the generic binary op, with broadcasting ----
// Op has: const char* name; bool needs_inputs (false: the gradients depend on g alone, and
// nothing is saved); template <C> C forward(C a, C b) const;
// template <C> C grad_a(C g, C a, C b) const; template <C> C grad_b(C g, C a, C b) const.
// Optionally bool passes_gradient[2]: true where grad_a (or grad_b) is g itself, so that
// backward hands g on (summed to the input's shape) instead of copying it element by element.

template <typename Op>
bool passes_gradient(const Op& op, int which) {
  if constexpr (requires { op.passes_gradient[0]; }) {
    return op.passes_gradient[which];
  } else {
    return false;
  }
}

template <typename Op>
struct BinaryBackward : autograd::Node {
  Op op;
  autograd::SavedTensor a, b;
  Shape a_shape, b_shape, out_shape;
  DType a_dtype = DType::f32, b_dtype = DType::f32;  // the gradients' dtypes
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release() override {
    a.reset();
    b.reset();
  }
};

// out = f(a, b) in fp32 for an fp32 and a bf16 or f16 input of one shape (reads_mixed_inputs).
template <typename F>
void run_widening_map2(const Tensor& a, const Tensor& b, Tensor& out, const F& f) {
  const int64_t n = a.numel();
  if (reference_mode()) {
    NoGradGuard no_grad;
    const Tensor wa = a.to(DType::f32), wb = b.to(DType::f32);  // exact
    kernels::map2_reference(wa.data<float>(), wb.data<float>(), out.data<float>(), n, f);
    return;
  }
  auto run = [&]<typename A, typename B>() {
    kernels::map2_widening_fast(a.data<A>(), b.data<B>(), out.data<float>(), n, f);
  };
  const DType narrow = a.dtype() == DType::f32 ? b.dtype() : a.dtype();
  if (a.dtype() == DType::f32) {
    narrow == DType::bf16 ? run.template operator()<float, bfloat16>()
                          : run.template operator()<float, float16>();
  } else {
    narrow == DType::bf16 ? run.template operator()<bfloat16, float>()
                          : run.template operator()<float16, float>();
  }
}

/// widening: the op accepts an fp32 and a bf16 or f16 input of one shape, as autocast's promote
/// rule hands them to add and sub (OpInfo::fp32_inside), and returns fp32.
template <typename Op>
Tensor binary(const Tensor& a, const Tensor& b, const Op& op, bool widening = false) {
  check_floating(op.name, a, "first input");
  check_floating(op.name, b, "second input");
  const bool mixed = widening && a.dtype() != b.dtype() && amp::detail::reads_mixed_inputs(a, b);
  if (!mixed) check_same_dtype(op.name, a, b);
  const Shape shape = broadcast_shapes(op.name, a.shape(), b.shape());
  Tensor out = empty(shape, mixed ? DType::f32 : a.dtype(), MemoryTag::activation, a.device());
  auto f = [&](auto x, auto y) { return op.forward(x, y); };
  if (mixed) {
    run_widening_map2(a, b, out, f);
  } else {
    visit_floating(a.dtype(), op.name, [&]<typename T>() {
      if (a.shape() == b.shape()) {
        run_map2<T>(a, b, out, f);
      } else if (reference_mode()) {
        kernels::broadcast_map2<T, decltype(f), true>(a.data<T>(), a.shape(), b.data<T>(),
                                                      b.shape(), out.data<T>(), shape, f);
      } else {
        kernels::broadcast_map2<T, decltype(f), false>(a.data<T>(), a.shape(), b.data<T>(),
                                                       b.shape(), out.data<T>(), shape, f);
      }
    });
  }
  if (auto node = autograd::make_node<BinaryBackward<Op>>(op.name, {&a, &b})) {
    node->op = op;
    if (op.needs_inputs) {
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
  if (op.needs_inputs) {
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
    if (passes_gradient(op, which)) {  // gradients are never changed in place, so g is shared
      result[size_t(which)] = in_input_dtype(sum_to(g, which == 0 ? a_shape : b_shape));
      continue;
    }
    Tensor d = empty_like(g);
    visit_floating(g.dtype(), op.name, [&]<typename T>() {
      if (!op.needs_inputs) {
        run_map1<T>(g, d, [&](auto gg) {
          return which == 0 ? op.grad_a(gg, gg, gg) : op.grad_b(gg, gg, gg);
        });
      } else if (which == 0) {
        run_map3<T>(g, av, bv, d, [&](auto gg, auto x, auto y) { return op.grad_a(gg, x, y); });
      } else {
        run_map3<T>(g, av, bv, d, [&](auto gg, auto x, auto y) { return op.grad_b(gg, x, y); });
      }
    });
    result[size_t(which)] = in_input_dtype(sum_to(d, which == 0 ? a_shape : b_shape));
  }
  return result;
}

}  // namespace mixp::ops::detail
