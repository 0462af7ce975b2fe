// linear: y = x W^T + bias, with fp32 accumulation (f64 for f64), the bias added in fp32 and
// one rounding to the output dtype (the inputs' unless given). Weights are [out, in], as in
// PyTorch.
// Shape contract: x [..., in]; weight [out, in]; bias [out] or undefined; all the same dtype;
// the result is [..., out].
// Backward: dx = g W, dW = g^T x over all rows, dbias = sum of g over rows (fp32 accumulation;
// on the bf16 fast path dW and dbias come from one pass over g,
// kernels/cpu/linear_weight_grad.cpp). Under an enabled amp::Fp8Autocast scope the products run in
// FP8 instead (fp8_linear.cpp), or by the scope's FP4 recipe (fp4_recipe_linear.cpp).
#include "kernels/gemm.h"
#include "ops/fp8_ops.h"
#include "ops/gemm_op.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

// dW, and db with it, from mixp's own pass on AVX-512 BF16 (kernels/cpu/linear_weight_grad.cpp)
// for bf16 gradients and weights: it sums g for the bias while it packs g for the product, so
// the bias costs no pass of its own over g (such a pass was about 3% of a bf16 gpt step). db is
// fp32, rounded to the bias dtype once, as the separate sum is; the reference path sums apart.
// Only from kWeightGradMinRows rows: below, oneDNN's product and the separate sum are faster
// (docs/performance.md).
constexpr int64_t kWeightGradMinRows = 512;

bool weight_grads_fast(const Tensor& g, const Tensor& x, const Tensor& weight, int64_t rows,
                       bool with_bias, DType bias_dtype, Tensor& dw, Tensor& db) {
  const int64_t in = weight.size(1), out = weight.size(0);
  if (g.dtype() != DType::bf16 || x.dtype() != DType::bf16 || weight.dtype() != DType::bf16 ||
      reference_mode() || !kernels::gemm_fast_has_bf16() || rows < kWeightGradMinRows || in == 0 ||
      out == 0) {
    return false;
  }
  const int threads = num_threads();
  Tensor space = empty(Shape{kernels::linear_weight_grad_workspace_bytes(in, out, threads)},
                       DType::u8, MemoryTag::workspace);
  dw = empty(weight.shape(), DType::bf16);
  Tensor sums = with_bias ? empty(Shape{out}, DType::f32) : Tensor();
  kernels::linear_weight_grad_fast(rows, in, out, g.raw_data(), x.raw_data(), dw.raw_data(),
                                   with_bias ? sums.data<float>() : nullptr, space.data<uint8_t>(),
                                   threads);
  if (with_bias) db = sums.to(bias_dtype).detach();
  return true;
}

struct LinearBackward : autograd::Node {
  autograd::SavedTensor x, weight;
  DType bias_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get();
    const Tensor g = grads[0].to(xv.dtype()).detach();
    const int64_t in = wv.size(1), out = wv.size(0), rows = xv.numel() / std::max<int64_t>(in, 1);
    Tensor dx, dw, db;
    if (next[0].node) {  // [rows, out] x [out, in]
      dx = detail::gemm({.m = rows, .n = in, .k = out}, g, wv, xv.shape(), xv.dtype());
    }
    const bool bias_grad = next.size() > 2 && next[2].node;
    if (next[1].node) {
      // db from the same pass only where it sums grads[0] itself (a bf16 gradient), as the
      // separate sum would.
      const bool with_bias = bias_grad && grads[0].dtype() == xv.dtype();
      if (!weight_grads_fast(g, xv, wv, rows, with_bias, bias_dtype, dw, db)) {
        // [rows, out]^T x [rows, in]
        dw = detail::gemm({.m = out, .n = in, .k = rows, .trans_a = true}, g, xv, wv.shape(),
                          wv.dtype());
      }
    }
    if (bias_grad && !db.defined()) {
      NoGradGuard no_grad;
      db = ops::sum(grads[0].reshape({rows, out}), {0}).to(bias_dtype).detach();
    }
    if (next.size() == 2) return {dx, dw};
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
  }
};

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
              std::optional<DType> out_dtype) {
  if (amp::Fp8State* fp8 = amp::fp8_active()) {
    if (!fp8->recipe().fp4) return detail::fp8_linear(x_in, weight_in, bias_in, out_dtype, *fp8);
    return detail::fp4_recipe_linear(x_in, weight_in, bias_in, out_dtype, *fp8);
  }
  const auto cast = amp::autocast_inputs(OpKind::linear, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  detail::check_floating("linear", x, "input");
  detail::check_floating("linear", weight, "weight");
  detail::check_same_dtype("linear", x, weight);
  MIXP_CHECK(weight.ndim() == 2, "linear: weight must be [out, in], got ",
             weight.shape().to_string());
  MIXP_CHECK(x.ndim() >= 1 && x.size(-1) == weight.size(1), "linear: input ", x.shape().to_string(),
             " does not end in the weight's in-features ", weight.size(1), " (weight ",
             weight.shape().to_string(), ")");
  if (bias.defined()) {
    detail::check_floating("linear", bias, "bias");
    MIXP_CHECK(bias.ndim() == 1 && bias.size(0) == weight.size(0), "linear: bias must be [",
               weight.size(0), "], got ", bias.shape().to_string());
  }
  const DType out = out_dtype.value_or(x.dtype());
  const int64_t in = weight.size(1), n_out = weight.size(0);
  const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  dims.back() = n_out;
  const Shape out_shape(dims);
  Tensor y = detail::gemm({.m = rows, .n = n_out, .k = in, .trans_b = true}, x, weight, out_shape,
                          out, bias);
  if (auto node = bias.defined()
                      ? autograd::make_node<LinearBackward>("linear", {&x, &weight, &bias})
                      : autograd::make_node<LinearBackward>("linear", {&x, &weight})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    if (bias.defined()) node->bias_dtype = bias.dtype();
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
