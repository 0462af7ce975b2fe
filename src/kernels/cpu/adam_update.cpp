// The CPU candidates of kernels/weight_update.h's adam_update: the slots' chunks over the threads,
// the fp32 rule on AVX-512 or in scalar code (kernels/adam.h: the same bits), the f64 rule in
// double; the fallback runs the scalar code on one thread.
#include <cmath>

#include "kernels/cpu/weight_blocks.h"
#include "kernels/weight_update.h"

namespace mixp::kernels {
namespace {

using cpu::load_block;

// Elements [begin, end) of an f64 parameter, in double.
void adam_chunk_f64(const AdamSlot& s, int64_t begin, int64_t end) {
  const AdamStep<double> c(s.hyper);
  Tensor param = s.weights.param, exp_avg = s.exp_avg, exp_avg_sq = s.exp_avg_sq;
  double* w = param.data<double>();
  double* m = exp_avg.data<double>();
  double* v = exp_avg_sq.data<double>();
  double g[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t len = std::min(kBlock, end - i);
    load_block(s.weights.grad, i, len, g);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = i + j;
      const double gk = g[j] + c.l2 * w[k];
      const double wk = w[k] * c.shrink;
      m[k] = m[k] + c.b1 * (gk - m[k]);  // PyTorch's lerp
      v[k] = c.beta2 * v[k] + c.b2 * gk * gk;
      const double denom = std::sqrt(v[k]) / c.bc2_sqrt + c.e;
      w[k] = wk - c.step_size * (m[k] / denom);
    }
  }
}

// Elements [begin, end) of any other parameter: its fp32 weights, the gradient widened, the
// moments in fp32 or widened from bf16 and rounded back stochastically.
template <typename Path>
void adam_chunk_f32(const AdamSlot& s, int64_t begin, int64_t end) {
  const AdamConstants k = AdamStep<float>(s.hyper).as_constants();
  cpu::WeightBlocks<Path> weights(s.weights);
  Tensor exp_avg = s.exp_avg, exp_avg_sq = s.exp_avg_sq;  // writable handles
  const bool bf16_state = exp_avg.dtype() == DType::bf16;
  float g_block[kBlock], m_block[kBlock], v_block[kBlock];
  uint32_t words[kBlock];
  for (int64_t i = begin; i < end; i += kBlock) {
    const int64_t len = std::min(kBlock, end - i);
    const float* g = g_block;
    if (s.weights.grad.dtype() == DType::f32) {
      g = s.weights.grad.data<float>() + i;
    } else {
      load_block(s.weights.grad, i, len, g_block);
    }
    float *m = m_block, *v = v_block;
    if (bf16_state) {
      widen(exp_avg.data<bfloat16>() + i, len, m_block);
      widen(exp_avg_sq.data<bfloat16>() + i, len, v_block);
    } else {
      m = exp_avg.data<float>() + i;
      v = exp_avg_sq.data<float>() + i;
    }
    Path::adam(weights.load(i, len), g, m, v, len, k);
    weights.store(i, len);
    if (bf16_state) {
      Path::philox(s.state_rng, uint64_t(i), words, uint64_t(len));
      Path::round_bf16(m, words, 0, len, reinterpret_cast<uint16_t*>(exp_avg.data<bfloat16>() + i));
      Path::round_bf16(v, words, 16, len,
                       reinterpret_cast<uint16_t*>(exp_avg_sq.data<bfloat16>() + i));
    }
  }
}

template <typename Path, bool Parallel>
void adam_update_cpu(std::span<const AdamSlot> slots) {
  cpu::update_slots<Parallel>(slots, adam_chunk_f64, adam_chunk_f32<Path>);
}

}  // namespace

Kernel<AdamUpdateFn> adam_update(
    "adam_update",
    {{.name = "avx512", .isa = Isa::avx512, .fn = adam_update_cpu<cpu::Avx512Path, true>},
     {.name = "openmp", .fn = adam_update_cpu<cpu::ScalarPath, true>},
     {.name = "scalar", .fn = adam_update_cpu<cpu::ScalarPath, false>, .fallback = true}});

}  // namespace mixp::kernels
