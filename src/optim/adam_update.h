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

inline DType adam_state_dtype(const Tensor& p) {
  return p.dtype() == DType::f64 ? DType::f64 : DType::f32;
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

/// One slot's share of the vectorized fp32 update: fp32 weights (the parameter, or its fp32
/// master) and gradients of any floating dtype but f64 (widened exactly, a block at a time).
struct FusedAdamSlot {
  float* w;
  Tensor grad, param;  // param: narrowed from w after the update when bf16 or f16
  float *m, *v;
  kernels::AdamConstants k;
};

/// The slot as a FusedAdamSlot, if the vectorized kernel applies to it.
inline std::optional<FusedAdamSlot> fused_adam_slot(const MasterWeightOptimizer::Slot& s,
                                                    Tensor exp_avg, Tensor exp_avg_sq,
                                                    const AdamStep<float>& c) {
  Tensor param = s.param, master = s.master;  // shared storage: writable handles
  float* w = param.dtype() == DType::f32 ? param.data<float>()
             : master.defined()          ? master.data<float>()
                                         : nullptr;
  const DType gd = s.grad.dtype();
  if (w == nullptr || exp_avg.dtype() != DType::f32 ||
      (gd != DType::f32 && gd != DType::bf16 && gd != DType::f16) || s.compensation.defined() ||
      s.stochastic) {
    return std::nullopt;
  }
  return FusedAdamSlot{
      w,
      s.grad,
      param,
      exp_avg.data<float>(),
      exp_avg_sq.data<float>(),
      kernels::AdamConstants{c.step_size, c.bc2_sqrt, c.b1, c.beta2, c.b2, c.e, c.l2, c.shrink}};
}

/// The updates of all the slots in one parallel region (each region wakes the sleeping OpenMP
/// workers, tens of microseconds on a shared VM: one per parameter tensor cost more than the
/// small tensors' updates), in blocks of 16 x kBlock elements. The same operations in the same
/// order as the rule of adam_update, so the same bits as one region per slot.
inline void run_fused_adam(const std::vector<FusedAdamSlot>& slots) {
  constexpr int64_t kChunk = 16 * kernels::kBlock;
  std::vector<std::pair<size_t, int64_t>> chunks;  // (slot, first element)
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int64_t b = 0; b < slots[i].param.numel(); b += kChunk) chunks.emplace_back(i, b);
  }
  kernels::parallel_for(int64_t(chunks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const FusedAdamSlot& s = slots[chunks[size_t(c)].first];
      const int64_t begin = chunks[size_t(c)].second;
      const int64_t end = std::min(begin + kChunk, s.param.numel());
      if (s.grad.dtype() == DType::f32) {
        kernels::adam_f32(s.w + begin, s.grad.data<float>() + begin, s.m + begin, s.v + begin,
                          end - begin, s.k);
      } else {
        float g[kernels::kBlock];
        for (int64_t i = begin; i < end; i += kernels::kBlock) {
          const int64_t len = std::min(kernels::kBlock, end - i);
          load_block(s.grad, i, len, g);
          kernels::adam_f32(s.w + i, g, s.m + i, s.v + i, len, s.k);
        }
      }
      Tensor param = s.param;  // a writable handle
      if (param.dtype() == DType::bf16) {
        kernels::narrow(s.w + begin, end - begin, param.data<bfloat16>() + begin);
      } else if (param.dtype() == DType::f16) {
        kernels::narrow(s.w + begin, end - begin, param.data<float16>() + begin);
      }
    }
  });
}

/// One Adam update of a slot by the scalar rule (the slots fused_adam_slot declines: f64,
/// Kahan compensation, stochastic rounding, no fp32 weights), in the order of PyTorch's
/// single-tensor implementation.
template <typename C>
void adam_update(const MasterWeightOptimizer::Slot& s, Tensor exp_avg, Tensor exp_avg_sq,
                 const AdamStep<C>& c) {
  const C step_size = c.step_size, bc2_sqrt = c.bc2_sqrt, b1 = c.b1, beta2 = c.beta2, b2 = c.b2;
  const C e = c.e, l2 = c.l2, shrink = c.shrink;
  C* m = exp_avg.data<C>();
  C* v = exp_avg_sq.data<C>();
  update_parameter<C>(s, [=](int64_t i, C w, C g) {
    g = g + l2 * w;
    w = w * shrink;
    m[i] = m[i] + b1 * (g - m[i]);  // PyTorch's lerp
    v[i] = beta2 * v[i] + b2 * g * g;
    const C denom = std::sqrt(v[i]) / bc2_sqrt + e;
    return w - step_size * (m[i] / denom);
  });
}

}  // namespace mixp::optim::detail
