// matmul and bmm: C = A B with fp32 accumulation (f64 for f64), rounded once to the output
// dtype (the inputs' unless given).
// Shape contract: a [..., M, K]; b [K, N] (shared by every leading index) or [..., K, N] with
// the same leading dims; the result is [..., M, N]. bmm: a [B, M, K], b [B, K, N].
// Backward: dA = g B^T, dB = A^T g (summed over the leading dims when b is shared), computed
// from g converted to the inputs' dtype.
#include "ops/gemm_op.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct Plan {
  kernels::GemmShape shape;
  Shape out_shape;
  bool shared_b = false;
};

Plan plan(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_floating(op, a, "first input");
  detail::check_floating(op, b, "second input");
  detail::check_same_dtype(op, a, b);
  MIXP_CHECK(a.ndim() >= 2 && b.ndim() >= 2, op, ": inputs need at least 2 dimensions, got ",
             a.shape().to_string(), " and ", b.shape().to_string());
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  MIXP_CHECK(b.size(-2) == k, op, ": inner sizes differ: ", a.shape().to_string(), " times ",
             b.shape().to_string());
  Plan p;
  const int64_t batch = a.numel() / std::max<int64_t>(m * k, 1);
  p.shared_b = b.ndim() == 2;
  if (!p.shared_b) {
    bool same = a.ndim() == b.ndim();
    for (int d = 0; same && d < a.ndim() - 2; ++d) same = a.shape()[d] == b.shape()[d];
    MIXP_CHECK(same, op, ": leading dimensions differ: ", a.shape().to_string(), " and ",
               b.shape().to_string());
  }
  p.shape = {
      .batch = batch, .m = m, .n = n, .k = k, .batch_a = batch, .batch_b = p.shared_b ? 1 : batch};
  std::vector<int64_t> dims(a.shape().dims().begin(), a.shape().dims().end());
  dims.back() = n;
  p.out_shape = Shape(dims);
  return p;
}

struct MatmulBackward : autograd::Node {
  autograd::SavedTensor a, b;
  Plan p;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor av = a.get(), bv = b.get();
    const Tensor g = grads[0].to(av.dtype()).detach();
    const kernels::GemmShape& s = p.shape;
    Tensor da, db;
    if (next[0].node) {  // [.., M, N] x [.., K, N]^T
      da = detail::gemm({.batch = s.batch,
                         .m = s.m,
                         .n = s.k,
                         .k = s.n,
                         .trans_b = true,
                         .batch_a = s.batch,
                         .batch_b = s.batch_b},
                        g, bv, av.shape(), av.dtype());
    }
    if (next[1].node) {
      if (p.shared_b) {  // all rows at once: [B*M, K]^T x [B*M, N]
        db = detail::gemm({.m = s.k, .n = s.n, .k = s.batch * s.m, .trans_a = true}, av, g,
                          bv.shape(), bv.dtype());
      } else {
        db = detail::gemm({.batch = s.batch,
                           .m = s.k,
                           .n = s.n,
                           .k = s.m,
                           .trans_a = true,
                           .batch_a = s.batch,
                           .batch_b = s.batch},
                          av, g, bv.shape(), bv.dtype());
      }
    }
    return {da, db};
  }
  void release() override {
    a.reset();
    b.reset();
  }
};

Tensor product(const char* op, const Tensor& a, const Tensor& b, std::optional<DType> out_dtype) {
  const Plan p = plan(op, a, b);
  const DType out = out_dtype.value_or(a.dtype());
  MIXP_CHECK(is_floating(out) && out != DType::e4m3 && out != DType::e5m2, op, ": output dtype ",
             name_of(out), " is not f32, f64, f16 or bf16");
  Tensor c = detail::gemm(p.shape, a, b, p.out_shape, out);
  if (auto node = autograd::make_node<MatmulBackward>(op, {&a, &b})) {
    node->a = autograd::SavedTensor(a);
    node->b = autograd::SavedTensor(b);
    node->p = p;
    autograd::set_history(c, node);
  }
  return c;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, std::optional<DType> out_dtype) {
  const auto cast = amp::autocast_inputs(OpKind::matmul, {&a, &b});
  return cast.output(product("matmul", cast[0], cast[1], out_dtype));
}

Tensor bmm(const Tensor& a, const Tensor& b, std::optional<DType> out_dtype) {
  const auto cast = amp::autocast_inputs(OpKind::bmm, {&a, &b});
  MIXP_CHECK(
      a.defined() && b.defined() && a.ndim() == 3 && b.ndim() == 3 && a.shape()[0] == b.shape()[0],
      "bmm: needs a [B, M, K] and b [B, K, N], got ",
      a.defined() ? a.shape().to_string() : "undefined", " and ",
      b.defined() ? b.shape().to_string() : "undefined");
  return cast.output(product("bmm", cast[0], cast[1], out_dtype));
}

}  // namespace mixp::ops
