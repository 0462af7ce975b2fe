// The cpu candidates of the elementwise kernels (kernels/elementwise_ops.h), generated from an
// op's functor. Private to mixp.
//
// A unary functor has
//   static constexpr const char* name;  static constexpr Saved saved;
//   template <typename C> C forward(C x) const;
//   template <typename C> C backward(C g, C saved) const;  // saved: x, y, or g (Saved::nothing)
//   double scalar;                       // only the ops with a scalar, as their one member
// and optionally the vectorized kernels
//   static void forward_block(const float* x, float* y, int64_t n);
//   static void backward_block(const float* g, const float* saved, float* dx, int64_t n);
//   static void forward_bf16(const uint16_t* x, uint16_t* y, int64_t n);
//   static void backward_bf16(const uint16_t* g, const uint16_t* saved, uint16_t* dx, int64_t n);
// where the bf16 ones give the bits of widening, the block kernel and rounding, in one pass.
// A binary functor has
//   static constexpr const char* name;  static constexpr bool needs_inputs;
//   template <typename C> C forward(C a, C b) const;
//   template <typename C> C grad_a(C g, C a, C b) const;  and grad_b.
//
// The candidates, best first: bf16 lanes (bf16 tensors, ops that have them), fp32 blocks (every
// dtype but f64, ops that have them), the per-element map over the threads (fp32 compute,
// double for f64), and the fallback: one element at a time in double, rounded once. The
// vectorized kernels choose their instruction set inside (kernels/vmath.h, the same bits on
// every ISA), so the candidates need none.
#pragma once

#include <concepts>
#include <type_traits>

#include "kernels/elementwise.h"
#include "kernels/elementwise_ops.h"

namespace mixp::kernels {

/// What a unary op's backward reads besides the gradient.
enum class Saved : uint8_t { input, output, nothing };

template <typename Op>
concept HasBlockKernels = requires(const float* c, float* m, int64_t n) {
  Op::forward_block(c, m, n);
  Op::backward_block(c, c, m, n);
};

template <typename Op>
concept HasBf16Kernels = requires(const uint16_t* c, uint16_t* m, int64_t n) {
  Op::forward_bf16(c, m, n);
  Op::backward_bf16(c, c, m, n);
};

/// An op with a scalar operand (add_scalar, mul_scalar, pow): its kernels take the scalar.
template <typename Op>
concept ScalarOp = requires(const Op& op) {
  { op.scalar } -> std::convertible_to<double>;
};

template <typename Op>
using UnaryForwardKernel = Kernel<std::conditional_t<ScalarOp<Op>, ScalarUnaryFn, UnaryFn>>;
template <typename Op>
using UnaryBackwardKernel =
    Kernel<std::conditional_t<ScalarOp<Op>, ScalarUnaryBackwardFn, UnaryBackwardFn>>;

namespace elementwise {

// ---- the candidates' bodies, over the functor ----

template <typename Op>
void forward_bf16_lanes(const Op&, const Tensor& x, Tensor& y) {
  const auto* in = reinterpret_cast<const uint16_t*>(x.data<bfloat16>());
  auto* out = reinterpret_cast<uint16_t*>(y.data<bfloat16>());
  parallel_for(x.numel(), kMapGrain, [&](int64_t begin, int64_t end) {
    Op::forward_bf16(in + begin, out + begin, end - begin);
  });
}

template <typename Op>
void forward_map(const Op& op, const Tensor& x, Tensor& y) {
  visit_floating(x.dtype(), Op::name, [&]<typename T>() {
    map1_fast(x.data<T>(), y.data<T>(), x.numel(), [&](auto v) { return op.forward(v); });
  });
}

template <typename Op>
void forward_blocks(const Op& op, const Tensor& x, Tensor& y) {
  visit_floating(x.dtype(), Op::name, [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {  // no fp32 blocks for f64: the map is its best
      forward_map(op, x, y);
    } else {
      map1_block_fast(x.data<T>(), y.data<T>(), x.numel(), Op::forward_block);
    }
  });
}

template <typename Op>
void forward_reference(const Op& op, const Tensor& x, Tensor& y) {
  visit_floating(x.dtype(), Op::name, [&]<typename T>() {
    map1_reference(x.data<T>(), y.data<T>(), x.numel(), [&](auto v) { return op.forward(v); });
  });
}

template <typename Op>
void backward_bf16_lanes(const Op&, const Tensor& g, const Tensor& saved, Tensor& dx) {
  const auto* grad = reinterpret_cast<const uint16_t*>(g.data<bfloat16>());
  const auto* kept = reinterpret_cast<const uint16_t*>(saved.data<bfloat16>());
  auto* out = reinterpret_cast<uint16_t*>(dx.data<bfloat16>());
  parallel_for(g.numel(), kMapGrain, [&](int64_t begin, int64_t end) {
    Op::backward_bf16(grad + begin, kept + begin, out + begin, end - begin);
  });
}

template <typename Op>
void backward_map(const Op& op, const Tensor& g, const Tensor& saved, Tensor& dx) {
  visit_floating(g.dtype(), Op::name, [&]<typename T>() {
    if constexpr (Op::saved == Saved::nothing) {
      map1_fast(g.data<T>(), dx.data<T>(), g.numel(),
                [&](auto grad) { return op.backward(grad, grad); });
    } else {
      map2_fast(g.data<T>(), saved.data<T>(), dx.data<T>(), g.numel(),
                [&](auto grad, auto v) { return op.backward(grad, v); });
    }
  });
}

template <typename Op>
void backward_blocks(const Op& op, const Tensor& g, const Tensor& saved, Tensor& dx) {
  visit_floating(g.dtype(), Op::name, [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      backward_map(op, g, saved, dx);
    } else {
      map2_block_fast(g.data<T>(), saved.data<T>(), dx.data<T>(), g.numel(), Op::backward_block);
    }
  });
}

template <typename Op>
void backward_reference(const Op& op, const Tensor& g, const Tensor& saved, Tensor& dx) {
  visit_floating(g.dtype(), Op::name, [&]<typename T>() {
    if constexpr (Op::saved == Saved::nothing) {
      map1_reference(g.data<T>(), dx.data<T>(), g.numel(),
                     [&](auto grad) { return op.backward(grad, grad); });
    } else {
      map2_reference(g.data<T>(), saved.data<T>(), dx.data<T>(), g.numel(),
                     [&](auto grad, auto v) { return op.backward(grad, v); });
    }
  });
}

// ---- the bodies as the kernels' signatures: the functor made from the scalar, if any ----

template <typename Op, auto body>
constexpr auto as_forward() {
  if constexpr (ScalarOp<Op>) {
    return +[](const Tensor& x, double scalar, Tensor& y) { body(Op{scalar}, x, y); };
  } else {
    return +[](const Tensor& x, Tensor& y) { body(Op{}, x, y); };
  }
}

template <typename Op, auto body>
constexpr auto as_backward() {
  if constexpr (ScalarOp<Op>) {
    return +[](const Tensor& g, const Tensor& saved, double scalar, Tensor& dx) {
      body(Op{scalar}, g, saved, dx);
    };
  } else {
    return +[](const Tensor& g, const Tensor& saved, Tensor& dx) { body(Op{}, g, saved, dx); };
  }
}

// Predicates on the dtype of a call's first tensor, for any of the signatures.
template <typename Fn>
struct FirstDtype;
template <typename... Args>
struct FirstDtype<void(Args...)> {
  static DType of(const Tensor& first, const auto&...) { return first.dtype(); }
  static bool bf16(const std::remove_cvref_t<Args>&... args) { return of(args...) == DType::bf16; }
  static bool not_f64(const std::remove_cvref_t<Args>&... args) {
    return of(args...) != DType::f64;
  }
};

}  // namespace elementwise

namespace elementwise {

/// The kinds of candidate, fastest first.
enum class Kind : uint8_t { bf16_lanes, fp32_blocks, map, fallback };

// One candidate of each kind, as templates so that only the kinds an op has are instantiated.
template <typename Op, Kind kind>
typename UnaryForwardKernel<Op>::Candidate forward_candidate() {
  using Is = FirstDtype<std::remove_pointer_t<typename UnaryForwardKernel<Op>::Fn>>;
  if constexpr (kind == Kind::bf16_lanes) {
    return {
        .name = "bf16_lanes", .applies = Is::bf16, .fn = as_forward<Op, forward_bf16_lanes<Op>>()};
  } else if constexpr (kind == Kind::fp32_blocks) {
    return {
        .name = "fp32_blocks", .applies = Is::not_f64, .fn = as_forward<Op, forward_blocks<Op>>()};
  } else if constexpr (kind == Kind::map) {
    return {.name = "openmp", .fn = as_forward<Op, forward_map<Op>>()};
  } else {
    return {.name = "scalar", .fn = as_forward<Op, forward_reference<Op>>(), .fallback = true};
  }
}

template <typename Op, Kind kind>
typename UnaryBackwardKernel<Op>::Candidate backward_candidate() {
  using Is = FirstDtype<std::remove_pointer_t<typename UnaryBackwardKernel<Op>::Fn>>;
  if constexpr (kind == Kind::bf16_lanes) {
    return {.name = "bf16_lanes",
            .applies = Is::bf16,
            .fn = as_backward<Op, backward_bf16_lanes<Op>>()};
  } else if constexpr (kind == Kind::fp32_blocks) {
    return {.name = "fp32_blocks",
            .applies = Is::not_f64,
            .fn = as_backward<Op, backward_blocks<Op>>()};
  } else if constexpr (kind == Kind::map) {
    return {.name = "openmp", .fn = as_backward<Op, backward_map<Op>>()};
  } else {
    return {.name = "scalar", .fn = as_backward<Op, backward_reference<Op>>(), .fallback = true};
  }
}

}  // namespace elementwise

/// The kernel of a unary op's forward, with its cpu candidates.
template <typename Op>
UnaryForwardKernel<Op> unary_forward_kernel(const char* name) {
  using enum elementwise::Kind;
  using elementwise::forward_candidate;
  if constexpr (HasBf16Kernels<Op> && HasBlockKernels<Op>) {
    return {name,
            {forward_candidate<Op, bf16_lanes>(), forward_candidate<Op, fp32_blocks>(),
             forward_candidate<Op, map>(), forward_candidate<Op, fallback>()}};
  } else if constexpr (HasBf16Kernels<Op>) {
    return {name,
            {forward_candidate<Op, bf16_lanes>(), forward_candidate<Op, map>(),
             forward_candidate<Op, fallback>()}};
  } else if constexpr (HasBlockKernels<Op>) {
    return {name,
            {forward_candidate<Op, fp32_blocks>(), forward_candidate<Op, map>(),
             forward_candidate<Op, fallback>()}};
  } else {
    return {name, {forward_candidate<Op, map>(), forward_candidate<Op, fallback>()}};
  }
}

/// The kernel of a unary op's backward, with its cpu candidates. The vectorized ones need the
/// saved tensor, which an op of Saved::nothing does not keep.
template <typename Op>
UnaryBackwardKernel<Op> unary_backward_kernel(const char* name) {
  using enum elementwise::Kind;
  using elementwise::backward_candidate;
  constexpr bool keeps = Op::saved != Saved::nothing;
  if constexpr (keeps && HasBf16Kernels<Op> && HasBlockKernels<Op>) {
    return {name,
            {backward_candidate<Op, bf16_lanes>(), backward_candidate<Op, fp32_blocks>(),
             backward_candidate<Op, map>(), backward_candidate<Op, fallback>()}};
  } else if constexpr (keeps && HasBf16Kernels<Op>) {
    return {name,
            {backward_candidate<Op, bf16_lanes>(), backward_candidate<Op, map>(),
             backward_candidate<Op, fallback>()}};
  } else if constexpr (keeps && HasBlockKernels<Op>) {
    return {name,
            {backward_candidate<Op, fp32_blocks>(), backward_candidate<Op, map>(),
             backward_candidate<Op, fallback>()}};
  } else {
    return {name, {backward_candidate<Op, map>(), backward_candidate<Op, fallback>()}};
  }
}

namespace elementwise {

// out = f(a, b) in fp32 for an fp32 and a bf16 or f16 input of one shape.
template <bool Reference, typename F>
void widening_map2(const Tensor& a, const Tensor& b, Tensor& out, const F& f) {
  auto run = [&]<typename A, typename B>() {
    if constexpr (Reference) {  // both widen exactly to double: f in double, rounded once
      const A* x = a.data<A>();
      const B* y = b.data<B>();
      float* o = out.data<float>();
      for (int64_t i = 0; i < out.numel(); ++i) {
        o[i] = from_double<float>(f(to_double(x[i]), to_double(y[i])));
      }
    } else {
      map2_widening_fast(a.data<A>(), b.data<B>(), out.data<float>(), out.numel(), f);
    }
  };
  const bool wide_first = a.dtype() == DType::f32;
  const DType narrow = wide_first ? b.dtype() : a.dtype();
  if (wide_first) {
    narrow == DType::bf16 ? run.template operator()<float, bfloat16>()
                          : run.template operator()<float, float16>();
  } else {
    narrow == DType::bf16 ? run.template operator()<bfloat16, float>()
                          : run.template operator()<float16, float>();
  }
}

template <typename Op, bool Reference>
void binary_forward(const Tensor& a, const Tensor& b, Tensor& out) {
  const Op op{};
  auto f = [&](auto x, auto y) { return op.forward(x, y); };
  if (a.dtype() != b.dtype()) {
    widening_map2<Reference>(a, b, out, f);
    return;
  }
  visit_floating(a.dtype(), Op::name, [&]<typename T>() {
    if (a.shape() == b.shape()) {
      if constexpr (Reference) {
        map2_reference(a.data<T>(), b.data<T>(), out.data<T>(), a.numel(), f);
      } else {
        map2_fast(a.data<T>(), b.data<T>(), out.data<T>(), a.numel(), f);
      }
    } else {
      broadcast_map2<T, decltype(f), Reference>(a.data<T>(), a.shape(), b.data<T>(), b.shape(),
                                                out.data<T>(), out.shape(), f);
    }
  });
}

template <typename Op, bool Reference>
void binary_backward(const Tensor& g, const Tensor& a, const Tensor& b, Operand which, Tensor& d) {
  const Op op{};
  auto map1 = [&](const auto* x, auto* y, const auto& f) {
    if constexpr (Reference) {
      map1_reference(x, y, g.numel(), f);
    } else {
      map1_fast(x, y, g.numel(), f);
    }
  };
  auto map3 = [&](const auto* x, const auto* y, const auto* z, auto* w, const auto& f) {
    if constexpr (Reference) {
      map3_reference(x, y, z, w, g.numel(), f);
    } else {
      map3_fast(x, y, z, w, g.numel(), f);
    }
  };
  visit_floating(g.dtype(), Op::name, [&]<typename T>() {
    if constexpr (!Op::needs_inputs) {
      map1(g.data<T>(), d.data<T>(), [&](auto gg) {
        return which == Operand::a ? op.grad_a(gg, gg, gg) : op.grad_b(gg, gg, gg);
      });
    } else if (which == Operand::a) {
      map3(g.data<T>(), a.data<T>(), b.data<T>(), d.data<T>(),
           [&](auto gg, auto x, auto y) { return op.grad_a(gg, x, y); });
    } else {
      map3(g.data<T>(), a.data<T>(), b.data<T>(), d.data<T>(),
           [&](auto gg, auto x, auto y) { return op.grad_b(gg, x, y); });
    }
  });
}

}  // namespace elementwise

/// The kernel of a binary op's forward: the map over the threads, and the fallback.
template <typename Op>
Kernel<BinaryFn> binary_forward_kernel(const char* name) {
  return Kernel<BinaryFn>(
      name, {{.name = "openmp", .fn = elementwise::binary_forward<Op, false>},
             {.name = "scalar", .fn = elementwise::binary_forward<Op, true>, .fallback = true}});
}

/// The kernel of a binary op's gradients: the map over the threads, and the fallback.
template <typename Op>
Kernel<BinaryBackwardFn> binary_backward_kernel(const char* name) {
  return Kernel<BinaryBackwardFn>(
      name, {{.name = "openmp", .fn = elementwise::binary_backward<Op, false>},
             {.name = "scalar", .fn = elementwise::binary_backward<Op, true>, .fallback = true}});
}

}  // namespace mixp::kernels
