// gradient_probe: the identity, whose backward shows the incoming gradient to a callback before
// passing it on unchanged. Adaptive precision measures a layer's output gradient with it.
// Shape contract: any tensor; the result has its shape, dtype and values (the same storage).
#include "ops/fp8_ops.h"
#include "ops/op_helpers.h"

namespace mixp::ops::detail {
namespace {

struct GradientProbeBackward : autograd::Node {
  std::function<void(const Tensor&)> on_gradient;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    {
      NoGradGuard no_grad;
      on_gradient(grads[0]);
    }
    return {std::move(grads[0])};
  }
  void release() override { on_gradient = nullptr; }
};

}  // namespace

Tensor gradient_probe(const Tensor& y, std::function<void(const Tensor&)> on_gradient) {
  auto node = autograd::make_node<GradientProbeBackward>("gradient_probe", {&y});
  if (!node) return y;
  Tensor out = y.detach();
  node->on_gradient = std::move(on_gradient);
  autograd::set_history(out, node);
  return out;
}

}  // namespace mixp::ops::detail
