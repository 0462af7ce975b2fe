// The Adam update shared by Adam (L2 penalty in the gradient) and AdamW (decoupled decay), in
// the order of PyTorch's single-tensor implementation. Private to mixp.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/adam.h"
#include "mixp/error.h"
#include "optim/update.h"

namespace mixp::optim::detail {

enum class Decay { l2, decoupled };

inline void check_adam_options(const char* name, double eps, std::array<double, 2> betas,
                               double weight_decay) {
  MIXP_CHECK(std::isfinite(eps) && eps >= 0.0, name, ": eps must be finite and >= 0, got ", eps);
  MIXP_CHECK(betas[0] >= 0.0 && betas[0] < 1.0, name, ": betas[0] must be in [0, 1), got ",
             betas[0]);
  MIXP_CHECK(betas[1] >= 0.0 && betas[1] < 1.0, name, ": betas[1] must be in [0, 1), got ",
             betas[1]);
  MIXP_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0, name,
             ": weight_decay must be finite and >= 0, got ", weight_decay);
}

/// The moments' dtype: f64 for f64 parameters, else the options' (f32 or bf16).
inline DType adam_state_dtype(const char* name, size_t i, const Tensor& p, DType requested) {
  MIXP_CHECK(requested == DType::f32 || requested == DType::bf16, name,
             ": state_dtype must be f32 or bf16, got ", name_of(requested));
  if (p.dtype() != DType::f64) return requested;
  MIXP_CHECK(requested == DType::f32, name, ": parameter ", i,
             " is f64, whose moments are f64; bf16 moments are for f32, bf16 and f16 parameters");
  return DType::f64;
}

/// The per-element constants of one slot's update, whose parameter has had `t` updates
/// counting this one.
template <typename C>
struct AdamStep {
  C step_size, bc2_sqrt, b1, beta2, b2, e, l2, shrink;
  AdamStep(int64_t t, double lr, std::array<double, 2> betas, double eps, double weight_decay,
           Decay decay)
      : step_size(C(lr / (1.0 - std::pow(betas[0], double(t))))),
        bc2_sqrt(C(std::sqrt(1.0 - std::pow(betas[1], double(t))))),
        b1(C(1.0 - betas[0])),
        beta2(C(betas[1])),
        b2(C(1.0 - betas[1])),
        e(C(eps)),
        l2(decay == Decay::l2 ? C(weight_decay) : C(0)),
        shrink(decay == Decay::decoupled ? C(1.0 - lr * weight_decay) : C(1)) {}
};

/// One slot's share of the vectorized fp32 update: any parameter but f64 (its fp32 weights
/// from WeightBlocks), gradients of any floating dtype but f64 (widened exactly, a block at a
/// time), and moments in fp32 or in bf16 (widened, updated in fp32, rounded back
/// stochastically: element j uses word state_rng.offset + j, its low half for m and its high
/// half for v).
struct FusedAdamSlot {
  MasterWeightOptimizer::Slot s;
  Tensor exp_avg, exp_avg_sq;
  PhiloxState state_rng;  // bf16 moments only
  kernels::AdamConstants k;
};

/// The updates of all the slots in one parallel region (each region wakes the sleeping OpenMP
/// workers, tens of microseconds on a shared VM: one per parameter tensor cost more than the
/// small tensors' updates), in blocks of 16 x kBlock elements: kernels/adam.h's rule, element
/// by element, so the same bits as one region per slot and for any thread count.
inline void run_fused_adam(const std::vector<FusedAdamSlot>& slots) {
  constexpr int64_t kChunk = 16 * kernels::kBlock;
  std::vector<std::pair<size_t, int64_t>> chunks;  // (slot, first element)
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int64_t b = 0; b < slots[i].s.param.numel(); b += kChunk) chunks.emplace_back(i, b);
  }
  kernels::parallel_for(int64_t(chunks.size()), 1, [&](int64_t first, int64_t last) {
    float g_block[kernels::kBlock], m_block[kernels::kBlock], v_block[kernels::kBlock];
    uint32_t words[kernels::kBlock];
    for (int64_t c = first; c < last; ++c) {
      const FusedAdamSlot& f = slots[chunks[size_t(c)].first];
      WeightBlocks weights(f.s);
      Tensor exp_avg = f.exp_avg, exp_avg_sq = f.exp_avg_sq;  // writable handles
      const bool bf16_state = exp_avg.dtype() == DType::bf16;
      const int64_t begin = chunks[size_t(c)].second;
      const int64_t end = std::min(begin + kChunk, f.s.param.numel());
      for (int64_t i = begin; i < end; i += kernels::kBlock) {
        const int64_t len = std::min(kernels::kBlock, end - i);
        const float* g = g_block;
        if (f.s.grad.dtype() == DType::f32) {
          g = f.s.grad.data<float>() + i;
        } else {
          load_block(f.s.grad, i, len, g_block);
        }
        float *m = m_block, *v = v_block;
        if (bf16_state) {
          kernels::widen(exp_avg.data<bfloat16>() + i, len, m_block);
          kernels::widen(exp_avg_sq.data<bfloat16>() + i, len, v_block);
        } else {
          m = exp_avg.data<float>() + i;
          v = exp_avg_sq.data<float>() + i;
        }
        kernels::adam_f32(weights.load(i, len), g, m, v, len, f.k);
        weights.store(i, len);
        if (bf16_state) {
          kernels::philox_words(f.state_rng, uint64_t(i), words, uint64_t(len));
          kernels::round_bf16_stochastic(m, words, 0, len,
                                         reinterpret_cast<uint16_t*>(exp_avg.data<bfloat16>() + i));
          kernels::round_bf16_stochastic(
              v, words, 16, len, reinterpret_cast<uint16_t*>(exp_avg_sq.data<bfloat16>() + i));
        }
      }
    }
  });
}

/// One Adam update of an f64 parameter by the scalar rule, in double, in the order of
/// PyTorch's single-tensor implementation (the vectorized kernel runs the same rule in fp32).
inline void adam_update_f64(const MasterWeightOptimizer::Slot& s, Tensor exp_avg, Tensor exp_avg_sq,
                            const AdamStep<double>& c) {
  const double step_size = c.step_size, bc2_sqrt = c.bc2_sqrt, b1 = c.b1, beta2 = c.beta2;
  const double b2 = c.b2, e = c.e, l2 = c.l2, shrink = c.shrink;
  double* m = exp_avg.data<double>();
  double* v = exp_avg_sq.data<double>();
  update_parameter<double>(s, [=](int64_t i, double w, double g) {
    g = g + l2 * w;
    w = w * shrink;
    m[i] = m[i] + b1 * (g - m[i]);  // PyTorch's lerp
    v[i] = beta2 * v[i] + b2 * g * g;
    const double denom = std::sqrt(v[i]) / bc2_sqrt + e;
    return w - step_size * (m[i] / denom);
  });
}

}  // namespace mixp::optim::detail
