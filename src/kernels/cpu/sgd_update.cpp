// The CPU candidates of kernels/weight_update.h's sgd_update: the slots' chunks over the threads,
// or on one thread for the fallback; the weights' blocks through AVX-512 or scalar code (the same
// bits).
#include "kernels/cpu/weight_blocks.h"
#include "kernels/weight_update.h"

namespace mixp::kernels {
namespace {

using cpu::load_block;

// The rule of one element in C, with its momentum buffer's element b (null: no momentum).
template <typename C>
struct SgdRule {
  C lr, wd, mu, keep;
  bool nesterov, first;
  explicit SgdRule(const SgdSlot& s)
      : lr(C(s.hyper.lr)),
        wd(C(s.hyper.weight_decay)),
        mu(C(s.hyper.momentum)),
        keep(C(1.0 - s.hyper.dampening)),
        nesterov(s.hyper.nesterov),
        first(s.first) {}
  C operator()(C w, C g, C* b) const {
    C d = g + wd * w;
    if (b) {
      *b = first ? d : mu * *b + keep * d;
      d = nesterov ? d + mu * *b : *b;
    }
    return w - lr * d;
  }
};

void sgd_chunk_f64(const SgdSlot& s, int64_t begin, int64_t end) {
  const SgdRule<double> rule(s);
  Tensor param = s.weights.param, momentum = s.momentum;
  double* w = param.data<double>();
  double* b = momentum.defined() ? momentum.data<double>() : nullptr;
  double g[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t len = std::min(kBlock, end - i);
    load_block(s.weights.grad, i, len, g);
    for (int64_t j = 0; j < len; ++j) w[i + j] = rule(w[i + j], g[j], b ? b + i + j : nullptr);
  }
}

template <typename Path>
void sgd_chunk_f32(const SgdSlot& s, int64_t begin, int64_t end) {
  const SgdRule<float> rule(s);
  cpu::WeightBlocks<Path> weights(s.weights);
  Tensor momentum = s.momentum;
  float* b = momentum.defined() ? momentum.data<float>() : nullptr;
  float g[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t len = std::min(kBlock, end - i);
    load_block(s.weights.grad, i, len, g);
    float* w = weights.load(i, len);
    for (int64_t j = 0; j < len; ++j) w[j] = rule(w[j], g[j], b ? b + i + j : nullptr);
    weights.store(i, len);
  }
}

template <typename Path, bool Parallel>
void sgd_update_cpu(std::span<const SgdSlot> slots) {
  cpu::update_slots<Parallel>(slots, sgd_chunk_f64, sgd_chunk_f32<Path>);
}

}  // namespace

Kernel<SgdUpdateFn> sgd_update(
    "sgd_update",
    {{.name = "avx512", .isa = Isa::avx512, .fn = sgd_update_cpu<cpu::Avx512Path, true>},
     {.name = "openmp", .fn = sgd_update_cpu<cpu::ScalarPath, true>},
     {.name = "scalar", .fn = sgd_update_cpu<cpu::ScalarPath, false>, .fallback = true}});

}  // namespace mixp::kernels
