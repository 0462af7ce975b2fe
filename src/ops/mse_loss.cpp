// mse_loss: mean((prediction - target)^2), accumulated in fp32 (f64 for f64 inputs).
// Shape contract: prediction and target have the same shape and dtype; the result is a scalar
// of dtype f32 (f64 for f64 inputs).
// Backward: dprediction = 2 g (prediction - target) / n, dtarget = -dprediction.
#include "kernels/mse_loss.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct MseBackward : autograd::Node {
  autograd::SavedTensor prediction, target;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor a = prediction.get(), b = target.get();
    const double scale = 2.0 * grads[0].item() / double(a.numel());
    Tensor da = detail::empty_like(a);
    kernels::mse_loss_backward(a, b, scale, da);
    Tensor db;
    if (next[1].node) {
      NoGradGuard no_grad;
      db = ops::neg(da);
    }
    return {next[0].node ? da : Tensor(), db};
  }
  void release() override {
    prediction.reset();
    target.reset();
  }
};

}  // namespace

Tensor mse_loss(const Tensor& prediction_in, const Tensor& target_in) {
  const auto cast = amp::autocast_inputs(OpKind::mse_loss, {&prediction_in, &target_in});
  const Tensor &prediction = cast[0], &target = cast[1];
  detail::check_floating("mse_loss", prediction, "prediction");
  detail::check_floating("mse_loss", target, "target");
  detail::check_same_dtype("mse_loss", prediction, target);
  MIXP_CHECK(prediction.shape() == target.shape(), "mse_loss: prediction ",
             prediction.shape().to_string(), " and target ", target.shape().to_string(),
             " differ in shape");
  MIXP_CHECK(prediction.numel() > 0, "mse_loss: the inputs are empty");
  const double loss = kernels::mse_loss(prediction, target);
  Tensor out = full({}, loss, prediction.dtype() == DType::f64 ? DType::f64 : DType::f32, MemoryTag::activation,
                    prediction.device());
  if (auto node = autograd::make_node<MseBackward>("mse_loss", {&prediction, &target})) {
    node->prediction = autograd::SavedTensor(prediction);
    node->target = autograd::SavedTensor(target);
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
