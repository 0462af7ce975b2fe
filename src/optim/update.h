// The fused update loop shared by the optimizers. Private to mixp.
//
// update_parameter<C>(slot, rule) walks the elements of one parameter in blocks of
// kernels::kBlock, split over threads with parallel_for, and calls
//
//   C rule(int64_t i, C w, C g)      // element i, its weight and gradient, in C
//
// which returns the new weight and may read and write element i of the optimizer's state.
// C is float for f32, bf16 and f16 parameters and double for f64 ones. Where the new weight
// goes depends on the slot: into the parameter (f32, f64), into the fp32 master and then the
// parameter rounded to nearest even (master_fp32), rounded stochastically into the parameter,
// or Kahan-summed into the parameter and its compensation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "mixp/convert.h"
#include "mixp/error.h"
#include "mixp/format.h"
#include "mixp/optim/master_weights.h"

namespace mixp::optim::detail {

/// Elements [begin, begin + len) of a tensor of any floating dtype, as C.
template <typename C>
void load_block(const Tensor& t, int64_t begin, int64_t len, C* out) {
  switch (t.dtype()) {
    case DType::f32: {
      const float* p = t.data<float>() + begin;
      for (int64_t j = 0; j < len; ++j) out[j] = C(p[j]);
      return;
    }
    case DType::f64: {
      const double* p = t.data<double>() + begin;
      for (int64_t j = 0; j < len; ++j) out[j] = C(p[j]);
      return;
    }
    case DType::bf16:
    case DType::f16: {
      float wide[kernels::kBlock];
      if (t.dtype() == DType::bf16) {
        kernels::widen(t.data<bfloat16>() + begin, len, wide);
      } else {
        kernels::widen(t.data<float16>() + begin, len, wide);
      }
      for (int64_t j = 0; j < len; ++j) out[j] = C(wide[j]);
      return;
    }
    default: break;
  }
  MIXP_CHECK(false, "optimizer: gradients of dtype ", name_of(t.dtype()),
             " are not supported (f32, f64, bf16, f16 are)");
}

/// Rounds to nearest even into T and back: the value T stores.
template <typename T>
inline float round_to(float x) {
  return float(T(x));
}

/// Low-precision parameter of storage type T (bfloat16 or float16), compute type float.
template <typename T, typename Rule>
void update_low_precision(MasterWeightOptimizer::Slot s, const Rule& rule) {
  const int64_t n = s.param.numel();
  T* p = s.param.data<T>();
  float* master = s.master.defined() ? s.master.data<float>() : nullptr;
  T* comp = s.compensation.defined() ? s.compensation.data<T>() : nullptr;
  kernels::parallel_for(n, 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
    float w[kernels::kBlock], g[kernels::kBlock], c[kernels::kBlock];
    for (int64_t i = begin; i < end; i += kernels::kBlock) {
      const int64_t len = std::min(kernels::kBlock, end - i);
      load_block(s.grad, i, len, g);
      if (master) {
        float* m = master + i;
        for (int64_t j = 0; j < len; ++j) m[j] = rule(i + j, m[j], g[j]);
        kernels::narrow(m, len, p + i);
      } else if (comp) {
        kernels::widen(p + i, len, w);
        kernels::widen(comp + i, len, c);
        for (int64_t j = 0; j < len; ++j) {
          const float y = (rule(i + j, w[j], g[j]) - w[j]) - c[j];
          const float t = round_to<T>(w[j] + y);
          c[j] = (t - w[j]) - y;
          w[j] = t;
        }
        kernels::narrow(w, len, p + i);  // exact: every w[j] is a T value
        kernels::narrow(c, len, comp + i);
      } else {
        MIXP_ASSERT(s.stochastic,
                    "a low-precision parameter needs a master, a compensation or "
                    "stochastic rounding");
        kernels::widen(p + i, len, w);
        for (int64_t j = 0; j < len; ++j) w[j] = rule(i + j, w[j], g[j]);
        PhiloxState rng = s.rng;
        rng.offset += uint64_t(i);
        if constexpr (std::is_same_v<T, bfloat16>) {
          convert_stochastic(std::span<const float>(w, size_t(len)),
                             std::span<bfloat16>(p + i, size_t(len)), rng);
        } else {
          round_to_format(Format::fp16(), std::span<const float>(w, size_t(len)),
                          std::span<float>(w, size_t(len)), Rounding::stochastic,
                          Overflow::inf_or_nan, rng);
          kernels::narrow(w, len, p + i);  // exact after the stochastic rounding
        }
      }
    }
  });
}

/// Applies `rule` to every element of the slot's parameter.
template <typename C, typename Rule>
void update_parameter(MasterWeightOptimizer::Slot s, const Rule& rule) {
  const DType dtype = s.param.dtype();
  if constexpr (std::is_same_v<C, double>) {
    MIXP_ASSERT(dtype == DType::f64, "double compute is for f64 parameters");
    double* p = s.param.data<double>();
    kernels::parallel_for(s.param.numel(), 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
      double g[kernels::kBlock];
      for (int64_t i = begin; i < end; i += kernels::kBlock) {
        const int64_t len = std::min(kernels::kBlock, end - i);
        load_block(s.grad, i, len, g);
        for (int64_t j = 0; j < len; ++j) p[i + j] = rule(i + j, p[i + j], g[j]);
      }
    });
  } else if (dtype == DType::f32) {
    float* p = s.param.data<float>();
    kernels::parallel_for(s.param.numel(), 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
      float g[kernels::kBlock];
      for (int64_t i = begin; i < end; i += kernels::kBlock) {
        const int64_t len = std::min(kernels::kBlock, end - i);
        load_block(s.grad, i, len, g);
        for (int64_t j = 0; j < len; ++j) p[i + j] = rule(i + j, p[i + j], g[j]);
      }
    });
  } else if (dtype == DType::bf16) {
    update_low_precision<bfloat16>(s, rule);
  } else {
    MIXP_ASSERT(dtype == DType::f16, "parameter dtype ", name_of(dtype));
    update_low_precision<float16>(s, rule);
  }
}

}  // namespace mixp::optim::detail
