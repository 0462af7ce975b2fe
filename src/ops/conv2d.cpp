// conv2d: y = x (*) weight + bias over NCHW tensors with PyTorch's layouts, fp32 accumulation
// (f64 for f64), the bias added in fp32 and one rounding to the output dtype.
// Shape contract: x [N, C, H, W]; weight [O, C / groups, kh, kw] with groups dividing C and O;
// bias [O] or undefined; x and weight the same dtype; the result is [N, O, OH, OW] with
// OH = (H + 2 pad_h - dilation_h (kh - 1) - 1) / stride_h + 1 (floor, at least 1), OW likewise.
// Backward: dx = the transposed convolution of g with weight (x's dtype); dweight = the
// correlation of x with g over N, OH, OW (weight's dtype); dbias = the sum of g over N, OH, OW
// in fp32 (bias's dtype). g is rounded to x's dtype first, as the low-precision backward of
// mixed-precision training computes.
// Kernels (kernels/conv2d.h): oneDNN for f32, and for bf16 where the CPU has AVX-512 BF16 (the
// forward and dx written straight to bf16, the forward's bias added to its fp32 accumulation);
// f16 (and bf16 elsewhere) widen exactly to f32 first; f64 and the fallback accumulate in double.
#include "kernels/conv2d.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

constexpr const char* kOp = "conv2d";

// A backward pass of the convolution (kernels/conv2d.h) rounded once to `out_dtype`.
Tensor run_pass_to(const kernels::Kernel<kernels::Conv2dPassFn>& pass, const kernels::ConvShape& s,
                   const Tensor& a, const Tensor& b, const Shape& shape, DType out_dtype) {
  const DType acc = detail::accumulation_dtype(a.dtype());
  const bool direct = out_dtype == acc;
  Tensor out = empty(shape, acc, direct ? MemoryTag::activation : MemoryTag::workspace, a.device());
  pass(s, a, b, out);
  return direct ? out : out.to(out_dtype).detach();
}

struct Conv2dBackward : autograd::Node {
  autograd::SavedTensor x, weight;
  kernels::ConvShape shape;
  DType bias_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    NoGradGuard no_grad;
    const Tensor xv = x.get(), wv = weight.get();
    const Tensor g = grads[0].to(xv.dtype()).detach();
    Tensor dx, dw, db;
    if (next[0].node) dx = empty(xv.shape(), xv.dtype(), MemoryTag::activation, xv.device());
    if (next[0].node && next[1].node) {
      // Both passes in one kernel, which shares their reading of g.
      const DType acc = detail::accumulation_dtype(xv.dtype());
      const bool direct = wv.dtype() == acc;
      Tensor dw_acc = empty(wv.shape(), acc, direct ? MemoryTag::activation : MemoryTag::workspace,
                            wv.device());
      kernels::conv2d_backward(shape, xv, g, wv, dx, dw_acc);
      dw = direct ? dw_acc : dw_acc.to(wv.dtype()).detach();
    } else if (next[0].node) {
      kernels::conv2d_backward_data_rounded(shape, g, wv, dx);
    } else if (next[1].node) {
      dw = run_pass_to(kernels::conv2d_backward_weights, shape, xv, g, wv.shape(), wv.dtype());
    }
    if (next.size() > 2 && next[2].node) {
      db = kernels::conv2d_bias_grad(grads[0]).to(bias_dtype).detach();
    }
    if (next.size() == 2) return {dx, dw};
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
  }
};

kernels::ConvShape check_and_shape(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const Conv2dOptions& o) {
  detail::check_floating(kOp, x, "input");
  detail::check_floating(kOp, weight, "weight");
  detail::check_same_dtype(kOp, x, weight);
  MIXP_CHECK(x.ndim() == 4, kOp, ": the input must be [N, C, H, W], got ", x.shape().to_string());
  MIXP_CHECK(weight.ndim() == 4, kOp, ": the weight must be [O, C / groups, kh, kw], got ",
             weight.shape().to_string());
  MIXP_CHECK(o.groups >= 1, kOp, ": groups must be at least 1, got ", o.groups);
  MIXP_CHECK(o.stride_h >= 1 && o.stride_w >= 1, kOp, ": strides must be at least 1, got ",
             o.stride_h, " x ", o.stride_w);
  MIXP_CHECK(o.dilation_h >= 1 && o.dilation_w >= 1, kOp, ": dilations must be at least 1, got ",
             o.dilation_h, " x ", o.dilation_w);
  MIXP_CHECK(o.pad_h >= 0 && o.pad_w >= 0, kOp, ": padding must not be negative, got ", o.pad_h,
             " x ", o.pad_w);
  kernels::ConvShape s;
  s.n = x.size(0), s.c = x.size(1), s.h = x.size(2), s.w = x.size(3);
  s.o = weight.size(0), s.kh = weight.size(2), s.kw = weight.size(3);
  s.stride_h = o.stride_h, s.stride_w = o.stride_w, s.pad_h = o.pad_h, s.pad_w = o.pad_w;
  s.dilation_h = o.dilation_h, s.dilation_w = o.dilation_w, s.groups = o.groups;
  MIXP_CHECK(s.c > 0 && s.h > 0 && s.w > 0, kOp, ": the input ", x.shape().to_string(),
             " has an empty channel or spatial dimension");
  MIXP_CHECK(weight.numel() > 0, kOp, ": the weight ", weight.shape().to_string(), " is empty");
  MIXP_CHECK(s.c % s.groups == 0, kOp, ": the input's ", s.c, " channels (input ",
             x.shape().to_string(), ") are not divisible by groups = ", s.groups);
  MIXP_CHECK(s.o % s.groups == 0, kOp, ": the weight's ", s.o, " output channels (weight ",
             weight.shape().to_string(), ") are not divisible by groups = ", s.groups);
  MIXP_CHECK(weight.size(1) * s.groups == s.c, kOp, ": the weight ", weight.shape().to_string(),
             " with groups = ", s.groups, " takes ", weight.size(1) * s.groups,
             " input channels, but the input ", x.shape().to_string(), " has ", s.c);
  if (bias.defined()) {
    detail::check_floating(kOp, bias, "bias");
    MIXP_CHECK(bias.ndim() == 1 && bias.size(0) == s.o, kOp, ": the bias must be [", s.o,
               "] for the weight ", weight.shape().to_string(), ", got ", bias.shape().to_string());
  }
  if (o.out_dtype) {
    const DType d = *o.out_dtype;
    MIXP_CHECK(d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16, kOp,
               ": the output dtype must be f32, f64, f16 or bf16, got ", name_of(*o.out_dtype));
  }
  const int64_t extent_h = o.dilation_h * (s.kh - 1) + 1, extent_w = o.dilation_w * (s.kw - 1) + 1;
  MIXP_CHECK(s.h + 2 * o.pad_h >= extent_h && s.w + 2 * o.pad_w >= extent_w, kOp,
             ": the padded input ", s.h + 2 * o.pad_h, " x ", s.w + 2 * o.pad_w, " (input ",
             x.shape().to_string(), ", padding ", o.pad_h, " x ", o.pad_w,
             ") is smaller than the dilated kernel ", extent_h, " x ", extent_w, " (weight ",
             weight.shape().to_string(), ", dilation ", o.dilation_h, " x ", o.dilation_w, ")");
  s.oh = (s.h + 2 * o.pad_h - extent_h) / o.stride_h + 1;
  s.ow = (s.w + 2 * o.pad_w - extent_w) / o.stride_w + 1;
  return s;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
              Conv2dOptions options) {
  const auto cast = amp::autocast_inputs(OpKind::conv2d, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  const kernels::ConvShape s = check_and_shape(x, weight, bias, options);
  const DType out = options.out_dtype.value_or(x.dtype());
  Tensor y;
  {
    NoGradGuard no_grad;
    y = empty(Shape{s.n, s.o, s.oh, s.ow}, out, MemoryTag::activation, x.device());
    kernels::conv2d_biased_forward(s, x, weight, bias, y);
  }
  if (auto node = bias.defined() ? autograd::make_node<Conv2dBackward>(kOp, {&x, &weight, &bias})
                                 : autograd::make_node<Conv2dBackward>(kOp, {&x, &weight})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->shape = s;
    if (bias.defined()) node->bias_dtype = bias.dtype();
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
