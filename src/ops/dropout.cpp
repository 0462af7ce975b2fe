// dropout: inverted dropout with a counter-based mask.
// Shape contract: x any shape (f32, f64, f16 or bf16); p in [0, 1); the result has x's shape
// and dtype. Element i is kept iff Philox word (generator offset + i), read as a uniform in
// [0, 1) from its top 24 bits (as Philox::uniform does), is >= p; kept elements are scaled by
// 1 / (1 - p), in fp32 (f64 for f64), and rounded once. The generator advances by numel. With
// training false or p == 0 the result is x itself and the generator does not move.
// Backward: dx = g * mask / (1 - p), the mask regenerated from the saved generator state, so
// nothing of the size of x is kept for backward.
#include "kernels/dropout.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

Tensor masked_scale(const Tensor& in, const PhiloxState& rng, double p) {
  Tensor out = detail::empty_like(in);
  kernels::dropout_mask(in, out, rng, p);
  return out;
}

struct DropoutBackward : autograd::Node {
  PhiloxState rng;
  double p = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {masked_scale(grads[0], rng, p)};
  }
};

}  // namespace

Tensor dropout(const Tensor& x_in, double p, Philox& generator, bool training) {
  const auto cast = amp::autocast_inputs(OpKind::dropout, {&x_in});
  const Tensor& x = cast[0];
  detail::check_floating("dropout", x);
  MIXP_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0.0) return cast.output(x);
  const PhiloxState rng = generator.state();
  Tensor out = masked_scale(x, rng, p);
  PhiloxState next = rng;
  next.offset += uint64_t(x.numel());
  generator.set_state(next);
  if (auto node = autograd::make_node<DropoutBackward>("dropout", {&x})) {
    node->rng = rng;
    node->p = p;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
