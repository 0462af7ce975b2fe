// dropout: inverted dropout with a counter-based mask.
// Shape contract: x any shape (f32, f64, f16 or bf16); p in [0, 1); the result has x's shape
// and dtype. Element i is kept iff Philox word (generator offset + i), read as a uniform in
// [0, 1) from its top 24 bits (as Philox::uniform does), is >= p; kept elements are scaled by
// 1 / (1 - p), in fp32 (f64 for f64), and rounded once. The generator advances by numel. With
// training false or p == 0 the result is x itself and the generator does not move.
// Backward: dx = g * mask / (1 - p), the mask regenerated from the saved generator state, so
// nothing of the size of x is kept for backward.
#include <algorithm>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

inline bool keep(uint32_t word, double p) { return double(word >> 8) * 0x1p-24 >= p; }

// out[i] = keep(i) ? in[i] * scale : 0, for in = x (forward) or g (backward).
template <typename T>
void masked_scale_fast(const T* in, T* out, int64_t n, const PhiloxState& rng, double p) {
  using C = kernels::Compute<T>;
  const C scale = C(1.0 / (1.0 - p));
  kernels::parallel_for(n, 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
    C x[kernels::kBlock];
    uint32_t words[kernels::kBlock];
    for (int64_t i = begin; i < end; i += kernels::kBlock) {
      const int64_t len = std::min(kernels::kBlock, end - i);
      philox_words(rng, uint64_t(i), words, uint64_t(len));
      kernels::widen(in + i, len, x);
      for (int64_t j = 0; j < len; ++j) x[j] = keep(words[j], p) ? x[j] * scale : C(0);
      kernels::narrow(x, len, out + i);
    }
  });
}

template <typename T>
void masked_scale_reference(const T* in, T* out, int64_t n, const PhiloxState& rng, double p) {
  const double scale = 1.0 / (1.0 - p);
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = keep(philox_word(rng, uint64_t(i)), p);
    out[i] = kernels::from_double<T>(kept ? kernels::to_double(in[i]) * scale : 0.0);
  }
}

Tensor masked_scale(const char* op, const Tensor& in, const PhiloxState& rng, double p) {
  Tensor out = detail::empty_like(in);
  visit_floating(in.dtype(), op, [&]<typename T>() {
    if (reference_mode()) {
      masked_scale_reference(in.data<T>(), out.data<T>(), in.numel(), rng, p);
    } else {
      masked_scale_fast(in.data<T>(), out.data<T>(), in.numel(), rng, p);
    }
  });
  return out;
}

struct DropoutBackward : autograd::Node {
  PhiloxState rng;
  double p = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {masked_scale(name, grads[0], rng, p)};
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
  Tensor out = masked_scale("dropout", x, rng, p);
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
