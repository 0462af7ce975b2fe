// mse_loss: mean((prediction - target)^2), accumulated in fp32 (f64 for f64 inputs).
// Shape contract: prediction and target have the same shape and dtype; the result is a scalar
// of dtype f32 (f64 for f64 inputs).
// Backward: dprediction = 2 g (prediction - target) / n, dtarget = -dprediction.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

template <typename T, typename Acc>
double mean_square(const T* a, const T* b, int64_t n) {
  Acc total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Acc d = Acc(kernels::to_double(a[i])) - Acc(kernels::to_double(b[i]));
    total += d * d;
  }
  return double(total) / double(n);
}

struct MseBackward : autograd::Node {
  autograd::SavedTensor prediction, target;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor a = prediction.get(), b = target.get();
    const double scale = 2.0 * grads[0].item() / double(a.numel());
    Tensor da = detail::empty_like(a);
    visit_floating(a.dtype(), "mse_loss", [&]<typename T>() {
      detail::run_map2<T>(a, b, da, [&](auto x, auto y) { return decltype(x)(scale) * (x - y); });
    });
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
  double loss = 0;
  visit_floating(prediction.dtype(), "mse_loss", [&]<typename T>() {
    loss = reference_mode()
               ? mean_square<T, double>(prediction.data<T>(), target.data<T>(), prediction.numel())
               : mean_square<T, kernels::Compute<T>>(prediction.data<T>(), target.data<T>(),
                                                     prediction.numel());
  });
  Tensor out = full({}, loss, prediction.dtype() == DType::f64 ? DType::f64 : DType::f32);
  if (auto node = autograd::make_node<MseBackward>("mse_loss", {&prediction, &target})) {
    node->prediction = autograd::SavedTensor(prediction);
    node->target = autograd::SavedTensor(target);
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
