// batch_norm: y = (x - mean[c]) * rstd[c] * weight[c] + bias[c] per channel c, rstd = 1 /
// sqrt(var + eps), computed in fp32 (f64 for f64 inputs); the result has x's dtype, rounded
// once. Training uses the batch's mean and biased variance over N and the spatial dims, and
// updates tracked running stats in place, as PyTorch does:
//   running_mean = (1 - momentum) running_mean + momentum mean,
//   running_var  = (1 - momentum) running_var  + momentum var * M / (M - 1)   (M values per
//   channel: the unbiased variance). Evaluation uses the running stats.
// Shape contract: x [N, C, ...] (NCHW, [N, C], [N, C, L]); weight and bias [C] (any floating
// dtype each) or undefined (no scale, no shift); running_mean and running_var f32 [C], or
// undefined when not tracked (training only); the result has x's shape and dtype.
// Backward, with xhat = (x - mean) * rstd and sums over the M values of a channel:
//   training  dx = weight rstd (g - sum(g) / M - xhat sum(g xhat) / M),
//   eval      dx = weight rstd g (the running stats are constants),
//   dweight = sum(g xhat), dbias = sum(g), accumulated in fp32 (f64 for f64) and returned in
//   the weight's and the bias's dtype.
// Saved: x in its dtype, and the per-channel mean and rstd used, in fp32 (f64 for f64).
// batch_norm_relu: relu(batch_norm(x)) by kernels that fuse the two (kernels/batch_norm.h), with
// the same bits; it saves its output as well, whose sign is ReLU's backward mask.
// batch_norm_relu_max_pool2d: max_pool2d(batch_norm_relu(x), 2, 2), x [N, C, H, W], H, W >= 2,
// the result [N, C, H / 2, W / 2]; it saves its pooled output (ReLU's mask at each winner) and
// the winner's place in each window (u8, 0..3), instead of max_pool2d's i64 index.
#include <cmath>

#include "kernels/batch_norm.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

/// The values of a channel: x [N, C, ...] holds N times the product of the spatial dims.
int64_t values_per_channel(const Shape& shape) {
  int64_t count = shape[0];
  for (int d = 2; d < shape.ndim(); ++d) count *= shape[d];
  return count;
}

// The gradients a batch norm node's inputs ask for, allocated: dx like x, and the weight's and
// the bias's one value per channel in their own dtypes; undefined where not asked for.
struct ChannelGrads {
  Tensor dx, dweight, dbias;
};
ChannelGrads channel_grads(const autograd::Node& node, const Tensor& x, const Tensor& weight,
                           DType weight_dtype, DType bias_dtype, bool has_bias) {
  ChannelGrads out;
  if (node.next[0].node) out.dx = detail::empty_like(x);
  if (weight.defined() && node.next[1].node)
    out.dweight = empty({x.size(1)}, weight_dtype, MemoryTag::gradient, x.device());
  if (has_bias && node.next[2].node)
    out.dbias = empty({x.size(1)}, bias_dtype, MemoryTag::gradient, x.device());
  return out;
}

struct BatchNormBackward : autograd::Node {
  autograd::SavedTensor x, weight, mean, rstd;
  autograd::SavedTensor relu_y;  // batch_norm_relu: its output; undefined for batch_norm
  DType weight_dtype = DType::f32, bias_dtype = DType::f32;
  bool has_bias = false, training = true;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get(), mv = mean.get(), rv = rstd.get();
    const Tensor yv = relu_y.get();
    const Tensor g = grads[0].dtype() == xv.dtype() ? grads[0] : grads[0].to(xv.dtype()).detach();
    auto [dx, dw, db] = channel_grads(*this, xv, wv, weight_dtype, bias_dtype, has_bias);
    if (yv.defined()) {
      kernels::batch_norm_relu_backward(xv, yv, g, wv, mv, rv, training, dx, dw, db);
    } else {
      kernels::batch_norm_backward(xv, g, wv, mv, rv, training, dx, dw, db);
    }
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    mean.reset();
    rstd.reset();
    relu_y.reset();
  }
};

void check_channels(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  MIXP_CHECK(t.ndim() == 1 && t.size(0) == x.size(1), op, ": the ", what, " must be [", x.size(1),
             "] for input ", x.shape().to_string(), " (channels in dimension 1), got ",
             t.shape().to_string());
}

void check_running(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  check_channels(op, x, t, what);
  MIXP_CHECK(t.dtype() == DType::f32, op, ": the ", what, " must be f32, got ", name_of(t.dtype()),
             " ", t.shape().to_string(), " (running stats stay fp32 whatever the input's dtype)");
}

void check_arguments(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& running_mean, const Tensor& running_var, bool training,
                     double momentum, double eps) {
  detail::check_floating(op, x);
  MIXP_CHECK(x.ndim() >= 2, op, ": the input must be [N, C, ...], got ", x.shape().to_string());
  MIXP_CHECK(std::isfinite(eps) && eps >= 0, op, ": eps must be finite and non-negative, got ",
             eps);
  MIXP_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
  if (weight.defined()) detail::check_floating(op, weight, "weight");
  if (bias.defined()) detail::check_floating(op, bias, "bias");
  check_channels(op, x, weight, "weight");
  check_channels(op, x, bias, "bias");
  check_running(op, x, running_mean, "running_mean");
  check_running(op, x, running_var, "running_var");
  MIXP_CHECK(running_mean.defined() == running_var.defined(), op,
             ": running_mean and running_var must both be given or both be undefined (input ",
             x.shape().to_string(), ")");
  if (training) {
    MIXP_CHECK(values_per_channel(x.shape()) > 1, op,
               ": training needs more than one value per channel, got input ",
               x.shape().to_string());
  } else {
    MIXP_CHECK(running_mean.defined(), op,
               ": evaluation needs running_mean and running_var (input ", x.shape().to_string(),
               ")");
  }
}

// batch_norm and batch_norm_relu: the checks, the kernel `forward`, and the backward node.
Tensor normalize(OpKind kind, const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                 Tensor& running_mean, Tensor& running_var, bool training, double momentum,
                 double eps) {
  const bool relu = kind == OpKind::batch_norm_relu;
  const char* op = relu ? "batch_norm_relu" : "batch_norm";
  const auto cast = amp::autocast_inputs(kind, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  check_arguments(op, x, weight, bias, running_mean, running_var, training, momentum, eps);
  Tensor y = detail::empty_like(x);
  Tensor mean =
      empty({x.size(1)}, detail::accumulation_dtype(x.dtype()), MemoryTag::activation, x.device());
  Tensor rstd =
      empty({x.size(1)}, detail::accumulation_dtype(x.dtype()), MemoryTag::activation, x.device());
  const kernels::BatchNormParams params{.training = training, .momentum = momentum, .eps = eps};
  const auto& forward = relu ? kernels::batch_norm_relu_forward : kernels::batch_norm_forward;
  forward(x, weight, bias, running_mean, running_var, params, y, mean, rstd);
  if (auto node = autograd::make_node<BatchNormBackward>(op, {&x, &weight, &bias})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->mean = autograd::SavedTensor(mean);
    node->rstd = autograd::SavedTensor(rstd);
    if (relu) node->relu_y = autograd::SavedTensor(y);
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->has_bias = bias.defined();
    node->training = training;
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

struct BatchNormReluPoolBackward : autograd::Node {
  autograd::SavedTensor x, weight, mean, rstd;
  autograd::SavedTensor y;  // the pooled output, whose sign is ReLU's mask at each winner
  Tensor window;            // u8, y's shape: the winner's place in each window
  DType weight_dtype = DType::f32, bias_dtype = DType::f32;
  bool has_bias = false, training = true;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get(), mv = mean.get(), rv = rstd.get(), yv = y.get();
    const Tensor g = grads[0].dtype() == xv.dtype() ? grads[0] : grads[0].to(xv.dtype()).detach();
    auto [dx, dw, db] = channel_grads(*this, xv, wv, weight_dtype, bias_dtype, has_bias);
    kernels::batch_norm_relu_pool_backward(xv, yv, window, g, wv, mv, rv, training, dx, dw, db);
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    mean.reset();
    rstd.reset();
    y.reset();
    window = Tensor();
  }
};

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                  Tensor& running_var, bool training, double momentum, double eps) {
  return normalize(OpKind::batch_norm, x, weight, bias, running_mean, running_var, training,
                   momentum, eps);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor& running_mean, Tensor& running_var, bool training, double momentum,
                       double eps) {
  return normalize(OpKind::batch_norm_relu, x, weight, bias, running_mean, running_var, training,
                   momentum, eps);
}

Tensor batch_norm_relu_max_pool2d(const Tensor& x_in, const Tensor& weight_in,
                                  const Tensor& bias_in, Tensor& running_mean, Tensor& running_var,
                                  bool training, double momentum, double eps) {
  const char* op = "batch_norm_relu_max_pool2d";
  const auto cast =
      amp::autocast_inputs(OpKind::batch_norm_relu_max_pool2d, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  check_arguments(op, x, weight, bias, running_mean, running_var, training, momentum, eps);
  MIXP_CHECK(x.ndim() == 4 && x.size(2) >= 2 && x.size(3) >= 2, op,
             ": the input must be [N, C, H, W] with H and W at least 2 (2 x 2 windows), got ",
             x.shape().to_string());
  const Shape pooled{x.size(0), x.size(1), x.size(2) / 2, x.size(3) / 2};
  Tensor y = empty(pooled, x.dtype(), MemoryTag::activation, x.device());
  auto node = autograd::make_node<BatchNormReluPoolBackward>(op, {&x, &weight, &bias});
  // The window places serve only the backward: an evaluation's forward writes none, and holds a
  // byte less per output value at its peak.
  Tensor window =
      node ? empty(pooled, DType::u8, MemoryTag::activation, x.device()) : Tensor();
  const DType acc = detail::accumulation_dtype(x.dtype());
  Tensor mean = empty({x.size(1)}, acc, MemoryTag::activation, x.device());
  Tensor rstd = empty({x.size(1)}, acc, MemoryTag::activation, x.device());
  const kernels::BatchNormParams params{.training = training, .momentum = momentum, .eps = eps};
  kernels::batch_norm_relu_pool_forward(x, weight, bias, running_mean, running_var, params, y,
                                        window, mean, rstd);
  if (node) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->mean = autograd::SavedTensor(mean);
    node->rstd = autograd::SavedTensor(rstd);
    node->y = autograd::SavedTensor(y);
    node->window = window;
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->has_bias = bias.defined();
    node->training = training;
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
