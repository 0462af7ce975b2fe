// The Adam update shared by Adam (L2 penalty in the gradient) and AdamW (decoupled decay), in
// the order of PyTorch's single-tensor implementation. Private to mixp.
#pragma once

#include <array>
#include <cmath>
#include <type_traits>

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

/// One Adam update of a slot whose parameter has had `t` updates counting this one.
template <typename C>
void adam_update(const MasterWeightOptimizer::Slot& s, Tensor exp_avg, Tensor exp_avg_sq, int64_t t,
                 double lr, std::array<double, 2> betas, double eps, double weight_decay,
                 Decay decay) {
  const double bias_correction1 = 1.0 - std::pow(betas[0], double(t));
  const double bias_correction2 = 1.0 - std::pow(betas[1], double(t));
  const C step_size = C(lr / bias_correction1);
  const C bc2_sqrt = C(std::sqrt(bias_correction2));
  const C b1 = C(1.0 - betas[0]), beta2 = C(betas[1]), b2 = C(1.0 - betas[1]);
  const C e = C(eps);
  const C l2 = decay == Decay::l2 ? C(weight_decay) : C(0);
  const C shrink = decay == Decay::decoupled ? C(1.0 - lr * weight_decay) : C(1);
  C* m = exp_avg.data<C>();
  C* v = exp_avg_sq.data<C>();
  if constexpr (std::is_same_v<C, float>) {
    // fp32 weights (the parameter, or its fp32 master) and gradients of any floating dtype but
    // f64 (widened exactly, a block at a time): the vectorized kernel, the same operations in
    // the same order as the rule below, so the same bits.
    Tensor param = s.param, master = s.master;  // shared storage: writable handles
    float* w = param.dtype() == DType::f32 ? param.data<float>()
               : master.defined()          ? master.data<float>()
                                           : nullptr;
    const DType gd = s.grad.dtype();
    if (w && (gd == DType::f32 || gd == DType::bf16 || gd == DType::f16) &&
        !s.compensation.defined() && !s.stochastic) {
      const kernels::AdamConstants k{step_size, bc2_sqrt, b1, beta2, b2, e, l2, shrink};
      kernels::parallel_for(param.numel(), 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
        if (gd == DType::f32) {
          const float* g = s.grad.data<float>();
          kernels::adam_f32(w + begin, g + begin, m + begin, v + begin, end - begin, k);
        } else {
          float g[kernels::kBlock];
          for (int64_t i = begin; i < end; i += kernels::kBlock) {
            const int64_t len = std::min(kernels::kBlock, end - i);
            load_block(s.grad, i, len, g);
            kernels::adam_f32(w + i, g, m + i, v + i, len, k);
          }
        }
        if (param.dtype() == DType::bf16) {
          kernels::narrow(w + begin, end - begin, param.data<bfloat16>() + begin);
        } else if (param.dtype() == DType::f16) {
          kernels::narrow(w + begin, end - begin, param.data<float16>() + begin);
        }
      });
      return;
    }
  }
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
