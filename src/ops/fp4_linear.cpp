// linear in FP4: y = fp4_gemm(q(x), q(W)) + bias, the product what an FP4 tensor core computes
// (amp::fp4_gemm), the bias added in fp32, one rounding to the output dtype.
// Shape contract: that of linear (x [..., in], weight [out, in], bias [out] or undefined); x and
// weight f32 or bf16 (bias any floating dtype). The output dtype is out_dtype, else the
// enclosing bf16/f16 Autocast's dtype, else x's.
// The recipe (amp::Fp4Recipe, mixp/amp/fp8.h) in forward and backward:
//   y  = q(x) q(W)^T            x in 1 x block blocks along in, W in square tiles (or 1 x block
//                               along in), both rounded to nearest even
//   dx = q(dy) q(W^T)^T         dy along out; q(W^T) = q(W) transposed with square tiles (the
//                               same values as forward), else W^T quantized along out
//   dW = q(H dy^T) q(H x^T)^T   along the rows, H the random Hadamard transform (or none)
//   db = the fp32 sum of dy's rows (not quantized)
// dy rounds stochastically in both GEMMs when the recipe says so, each GEMM with its own stream
// of the state (Fp8State::gradient_rounding), taken in forward: the layer's position in the step.
#include "mixp/amp/fp4.h"
#include "ops/fp8_ops.h"
#include "ops/op_helpers.h"

namespace mixp::ops::detail {
namespace {

struct Fp4LinearBackward : autograd::Node {
  autograd::SavedTensor x, weight;
  amp::Fp4Recipe recipe;
  amp::Fp4Tensor qw;  // forward's weight, reused transposed by dgrad under square tiles
  std::array<float, 16> signs{};
  PhiloxState dgrad_rounding{}, wgrad_rounding{};
  DType bias_dtype = DType::f32;

  amp::Fp4Options gradient_options(const PhiloxState& stream) const {
    return {.rounding = recipe.stochastic_gradients ? amp::Fp4Rounding::stochastic
                                                    : amp::Fp4Rounding::nearest_even,
            .philox = stream,
            .mx_rounding = recipe.mx_scale_rounding};
  }

  Tensor input_gradient(const Tensor& g, const Tensor& wv, const Shape& x_shape) const {
    const amp::Fp4Tensor qg =
        amp::quantize_fp4(g, recipe.scaling, gradient_options(dgrad_rounding));
    const amp::Fp4Tensor qwt = recipe.square_weights
                                   ? qw.transposed()
                                   : amp::quantize_fp4(transpose_last2(wv), recipe.scaling,
                                                       {.mx_rounding = recipe.mx_scale_rounding});
    return amp::fp4_gemm(qg, qwt).view(x_shape);
  }

  Tensor weight_gradient(const Tensor& g, const Tensor& x2d) const {
    Tensor gt = transpose_last2(g), xt = transpose_last2(x2d);
    if (recipe.hadamard) {
      gt = amp::random_hadamard16(gt, signs);
      xt = amp::random_hadamard16(xt, signs);
    }
    const amp::Fp4Tensor qgt =
        amp::quantize_fp4(gt, recipe.scaling, gradient_options(wgrad_rounding));
    const amp::Fp4Tensor qxt =
        amp::quantize_fp4(xt, recipe.scaling, {.mx_rounding = recipe.mx_scale_rounding});
    return amp::fp4_gemm(qgt, qxt);
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get();
    const int64_t in = wv.size(1), out = wv.size(0), rows = xv.numel() / std::max<int64_t>(in, 1);
    NoGradGuard no_grad;
    Tensor g = grads[0].reshape({rows, out});
    if (g.dtype() != DType::f32 && g.dtype() != DType::bf16) g = g.to(DType::f32);
    Tensor dx, dw, db;
    if (next[0].node) {
      dx = input_gradient(g, wv, xv.shape());
      if (dx.dtype() != xv.dtype()) dx = dx.to(xv.dtype());
    }
    if (next[1].node) {
      dw = weight_gradient(g, xv.reshape({rows, in}));
      if (dw.dtype() != wv.dtype()) dw = dw.to(wv.dtype());
    }
    if (next.size() > 2 && next[2].node) db = ops::sum(g, {0}).to(bias_dtype).detach();
    if (next.size() == 2) return {dx, dw};
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    qw = amp::Fp4Tensor();
  }
};

}  // namespace

Tensor fp4_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  std::optional<DType> out_dtype, amp::Fp8State& state, size_t layer) {
  const Tensor* inputs[] = {&x, &weight, &bias};
  const Fp8OpEntry entry = enter_fp8_op(OpKind::linear, inputs);
  constexpr const char* op = "linear (fp4)";
  check_quantized_linear(op, x, weight, bias);
  MIXP_ASSERT(state.recipe().fp4.has_value(), "fp4_linear without an FP4 recipe");
  const amp::Fp4Recipe& recipe = *state.recipe().fp4;
  const DType out = out_dtype.value_or(entry.autocast_output.value_or(x.dtype()));
  const int64_t in = weight.size(1), n_out = weight.size(0);
  const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  Tensor y;
  amp::Fp4Tensor qw;
  {
    NoGradGuard no_grad;
    const amp::Fp4Tensor qx = amp::quantize_fp4(x.reshape({rows, in}), recipe.scaling,
                                                {.mx_rounding = recipe.mx_scale_rounding});
    qw = amp::quantize_fp4(
        weight, recipe.scaling,
        {.square_blocks = recipe.square_weights, .mx_rounding = recipe.mx_scale_rounding});
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
    dims.back() = n_out;
    y = add_bias_and_round(amp::fp4_gemm(qx, qw), bias, out).view(Shape(dims));
  }
  if (auto node = bias.defined() ? autograd::make_node<Fp4LinearBackward>(op, {&x, &weight, &bias})
                                 : autograd::make_node<Fp4LinearBackward>(op, {&x, &weight})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->recipe = recipe;
    if (recipe.square_weights) node->qw = qw;
    node->signs = state.hadamard_signs();
    node->dgrad_rounding = state.gradient_rounding(layer, 0);
    node->wgrad_rounding = state.gradient_rounding(layer, 1);
    if (bias.defined()) node->bias_dtype = bias.dtype();
    autograd::set_history(y, node);
  }
  return y;
}

}  // namespace mixp::ops::detail
