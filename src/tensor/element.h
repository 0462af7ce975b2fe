// Element access and conversion for tensors of any dtype. Private to mixp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mixp/error.h"
#include "mixp/tensor.h"

namespace mixp {

template <typename T>
constexpr DType element_dtype() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, float16>)
    return DType::f16;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<T, float8_e4m3>)
    return DType::e4m3;
  else if constexpr (std::is_same_v<T, float8_e5m2>)
    return DType::e5m2;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::i64;
  else {
    static_assert(std::is_same_v<T, uint8_t>, "not a tensor element type");
    return DType::u8;
  }
}

/// double -> float rounded to odd: exact, or the neighbour with an odd last bit. A later
/// round-to-nearest-even to any format with at most 22 mantissa bits is then the correct
/// rounding of the double, with no double-rounding error.
float round_to_float_odd(double x);

/// The value of element i as double (exact for every dtype but i64 beyond 2^53).
double load_element(const void* data, DType dtype, int64_t i);
/// Stores `value` into element i, rounded once to nearest even (FP8 saturates; integers
/// truncate toward zero).
void store_element(void* data, DType dtype, int64_t i, double value);

/// dst = src converted (same number of elements; any dtypes).
void convert_elements(const Tensor& src, Tensor& dst);
/// f32 -> bf16/f16 with stochastic rounding, element i at Philox word rng.offset + i.
void convert_elements_stochastic(const Tensor& src, Tensor& dst, const PhiloxState& rng);
void fill_elements(Tensor& t, double value);

/// Calls f.template operator()<T>() with T the storage type of the floating dtype `d`.
template <typename F>
decltype(auto) visit_floating(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::f16: return f.template operator()<float16>();
    case DType::bf16: return f.template operator()<bfloat16>();
    default: break;
  }
  MIXP_CHECK(false, op, ": dtype ", name_of(d), " is not supported (f32, f64, f16, bf16 are)");
  return f.template operator()<float>();  // unreachable
}

}  // namespace mixp
