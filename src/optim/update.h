// The fused update loop shared by the optimizers. Private to mixp.
//
// update_parameter<C>(slot, rule) walks the elements of one parameter in blocks of
// kernels::kBlock, split over threads with parallel_for, and calls
//
//   C rule(int64_t i, C w, C g)      // element i, its weight and gradient, in C
//
// which returns the new weight and may read and write element i of the optimizer's state.
// C is float for f32, bf16 and f16 parameters and double for f64 ones. Where the new weight
// goes depends on the slot (WeightBlocks): into the parameter (f32, f64), into the fp32 master
// and then the parameter rounded to nearest even (master_fp32), rounded stochastically into
// the parameter, or Kahan-summed into the parameter and its compensation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/master_split.h"
#include "kernels/stochastic_rounding.h"
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

/// The fp32 weights of one slot, a block of at most kernels::kBlock elements at a time:
///
///   f32 parameter, or the fp32 master of an f16 one   in place
///   bf16 parameter under master_fp32                 the master joined from the parameter and
///                                                    its low halves, then split back
///   stochastic_rounding                              the parameter widened, then rounded
///                                                    stochastically with the slot's words
///   kahan                                            the parameter widened, then Kahan-summed
///                                                    with its compensation
///
/// One instance per thread: load(i, len) returns the weights of elements [i, i + len), which
/// the caller updates in place, and store(i, len) writes them back (the f16 master's parameter
/// rounded to nearest even). Blocks start at multiples of 8 (the tie bits are bytes).
class WeightBlocks {
 public:
  explicit WeightBlocks(const MasterWeightOptimizer::Slot& s) : s_(s) {}

  float* load(int64_t i, int64_t len) {
    if (s_.param.dtype() == DType::f32) return s_.param.data<float>() + i;
    if (s_.master.defined()) return s_.master.data<float>() + i;
    if (s_.master_low.defined()) {
      const int64_t n = s_.param.numel();
      const auto* low = s_.master_low.data<uint8_t>();
      kernels::join_master_bf16(param_bits() + i, reinterpret_cast<const uint16_t*>(low) + i,
                                low + 2 * n + i / 8, len, w_);
      return w_;
    }
    if (s_.param.dtype() == DType::bf16) {
      kernels::widen(s_.param.data<bfloat16>() + i, len, w_);
    } else {
      kernels::widen(s_.param.data<float16>() + i, len, w_);
    }
    if (s_.compensation.defined()) std::copy(w_, w_ + len, before_);
    return w_;
  }

  void store(int64_t i, int64_t len) {
    Tensor& param = s_.param;
    const DType dtype = param.dtype();
    if (dtype == DType::f32) return;
    if (s_.master.defined()) {
      kernels::narrow(s_.master.data<float>() + i, len, param.data<float16>() + i);
    } else if (s_.master_low.defined()) {
      const int64_t n = param.numel();
      auto* low = s_.master_low.data<uint8_t>();
      kernels::split_master_bf16(w_, len, param_bits() + i, reinterpret_cast<uint16_t*>(low) + i,
                                 low + 2 * n + i / 8);
    } else if (s_.compensation.defined()) {
      dtype == DType::bf16 ? kahan<bfloat16>(i, len) : kahan<float16>(i, len);
    } else {
      MIXP_ASSERT(s_.stochastic,
                  "a low-precision parameter needs a master, a compensation or stochastic "
                  "rounding");
      round_stochastically(i, len);
    }
  }

 private:
  uint16_t* param_bits() { return static_cast<uint16_t*>(s_.param.raw_data()); }

  // y = update - c; t = round(w + y); c = (t - w) - y; w = t, with the update new - before.
  template <typename T>
  void kahan(int64_t i, int64_t len) {
    Tensor &param = s_.param, &compensation = s_.compensation;
    float c[kernels::kBlock];
    kernels::widen(compensation.data<T>() + i, len, c);
    for (int64_t j = 0; j < len; ++j) {
      const float y = (w_[j] - before_[j]) - c[j];
      const float t = float(T(before_[j] + y));
      c[j] = (t - before_[j]) - y;
      w_[j] = t;
    }
    kernels::narrow(w_, len, param.data<T>() + i);  // exact: every w_[j] is a T value
    kernels::narrow(c, len, compensation.data<T>() + i);
  }

  // Element j of the parameter uses word s_.rng.offset + j of the slot's stream.
  void round_stochastically(int64_t i, int64_t len) {
    Tensor& param = s_.param;
    PhiloxState rng = s_.rng;
    if (param.dtype() == DType::bf16) {
      uint32_t words[kernels::kBlock];
      kernels::philox_words(rng, uint64_t(i), words, uint64_t(len));
      kernels::round_bf16_stochastic(w_, words, 0, len, param_bits() + i);
      return;
    }
    rng.offset += uint64_t(i);
    round_to_format(Format::fp16(), std::span<const float>(w_, size_t(len)),
                    std::span<float>(w_, size_t(len)), Rounding::stochastic, Overflow::inf_or_nan,
                    rng);
    kernels::narrow(w_, len, param.data<float16>() + i);  // exact after the stochastic rounding
  }

  MasterWeightOptimizer::Slot s_;  // a copy: writable handles
  float w_[kernels::kBlock];
  float before_[kernels::kBlock];  // kahan: the weights before the update
};

/// Applies `rule` to the elements of a low-precision or f32 parameter: a block of fp32
/// weights and gradients at a time, split over threads.
template <typename Rule>
void update_fp32_weights(const MasterWeightOptimizer::Slot& s, const Rule& rule) {
  kernels::parallel_for(s.param.numel(), 16 * kernels::kBlock, [&](int64_t begin, int64_t end) {
    WeightBlocks weights(s);
    float g[kernels::kBlock];
    for (int64_t i = begin; i < end; i += kernels::kBlock) {
      const int64_t len = std::min(kernels::kBlock, end - i);
      load_block(s.grad, i, len, g);
      float* w = weights.load(i, len);
      for (int64_t j = 0; j < len; ++j) w[j] = rule(i + j, w[j], g[j]);
      weights.store(i, len);
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
  } else {
    MIXP_ASSERT(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
                "parameter dtype ", name_of(dtype));
    update_fp32_weights(s, rule);
  }
}

}  // namespace mixp::optim::detail
