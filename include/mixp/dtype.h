// mixp/dtype.h — the element types of mixp tensors and their traits.
//
// A DType names how a tensor stores its elements. Its traits are constexpr, so that kernels and
// tolerances can be computed from them at compile time:
//
//   constexpr auto& t = mixp::traits(mixp::DType::bf16);
//   static_assert(t.size == 2 && t.epsilon == 0x1p-7);
//   std::printf("%s max %g\n", t.name, t.max);          // "bf16 max 3.38953e+38"
//   mixp::DType d = mixp::parse_dtype("e4m3");            // throws mixp::Error on unknown names
//
// The values are append-only: they are written into files and checkpoints, so an existing
// value never changes meaning.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "mixp/float_types.h"

namespace mixp {

enum class DType : uint8_t {
  f32 = 0,
  f64 = 1,
  f16 = 2,
  bf16 = 3,
  e4m3 = 4,  ///< OCP OFP8 E4M3 ("e4m3fn"): max 448, no infinity, NaN only at S.1111.111
  e5m2 = 5,  ///< OCP OFP8 E5M2: max 57344, with infinities and NaNs
  i32 = 6,
  i64 = 7,
  u8 = 8,
};
inline constexpr int kDTypeCount = 9;

/// Facts about a dtype. For integer dtypes the floating-point fields are zero, except max.
struct DTypeTraits {
  DType dtype;
  const char* name;  ///< short name, as accepted by parse_dtype: "f32", "bf16", "e4m3"...
  int size;          ///< bytes per element
  bool is_floating;
  int exponent_bits;  ///< 0 for integers
  int mantissa_bits;  ///< explicit fraction bits; 0 for integers
  int bias;           ///< exponent bias; 0 for integers
  bool has_infinity;
  bool has_nan;
  double max;            ///< largest finite value
  double min_normal;     ///< smallest positive normal value
  double min_subnormal;  ///< smallest positive subnormal value
  double epsilon;        ///< distance from 1 to the next larger value, 2^-mantissa_bits
};

namespace detail {
constexpr double pow2(int e) {
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r *= 0.5;
  return r;
}
/// Traits of a binary floating-point format. `ieee_top` says whether the all-ones exponent is
/// reserved for inf/NaN (IEEE) or holds numbers with NaN only at all-ones (OCP E4M3).
constexpr DTypeTraits float_traits(DType d, const char* name, int size, int e, int m,
                                   bool ieee_top) {
  const int bias = (1 << (e - 1)) - 1;
  const int emax = ieee_top ? ((1 << e) - 2) - bias : ((1 << e) - 1) - bias;
  // Largest mantissa: all ones for IEEE; all ones minus one where all-ones is the NaN.
  const double top_mantissa = ieee_top ? (2.0 - pow2(-m)) : (2.0 - 2.0 * pow2(-m));
  return DTypeTraits{d,
                     name,
                     size,
                     true,
                     e,
                     m,
                     bias,
                     ieee_top,
                     true,
                     top_mantissa * pow2(emax),
                     pow2(1 - bias),
                     pow2(1 - bias - m),
                     pow2(-m)};
}
constexpr DTypeTraits int_traits(DType d, const char* name, int size, double max) {
  return DTypeTraits{d, name, size, false, 0, 0, 0, false, false, max, 0.0, 0.0, 0.0};
}
inline constexpr DTypeTraits kTraits[kDTypeCount] = {
    float_traits(DType::f32, "f32", 4, 8, 23, true),
    float_traits(DType::f64, "f64", 8, 11, 52, true),
    float_traits(DType::f16, "f16", 2, 5, 10, true),
    float_traits(DType::bf16, "bf16", 2, 8, 7, true),
    float_traits(DType::e4m3, "e4m3", 1, 4, 3, false),
    float_traits(DType::e5m2, "e5m2", 1, 5, 2, true),
    int_traits(DType::i32, "i32", 4, 2147483647.0),
    int_traits(DType::i64, "i64", 8, 9223372036854775807.0),
    int_traits(DType::u8, "u8", 1, 255.0),
};
}  // namespace detail

constexpr const DTypeTraits& traits(DType d) { return detail::kTraits[static_cast<int>(d)]; }
constexpr int size_of(DType d) { return traits(d).size; }
constexpr const char* name_of(DType d) { return traits(d).name; }
constexpr bool is_floating(DType d) { return traits(d).is_floating; }

/// Every dtype, in value order.
std::span<const DType> all_dtypes();
/// The dtype named `name` ("f32", "bf16", "e4m3", ... and the aliases "fp32", "float32",
/// "fp16", "half", "bfloat16", "fp8_e4m3", "fp8_e5m2"). Throws mixp::Error for unknown names.
DType parse_dtype(std::string_view name);

/// The C++ storage type of a dtype: StorageOf<DType::bf16> is bfloat16.
template <DType D>
struct StorageType;
template <>
struct StorageType<DType::f32> {
  using type = float;
};
template <>
struct StorageType<DType::f64> {
  using type = double;
};
template <>
struct StorageType<DType::f16> {
  using type = float16;
};
template <>
struct StorageType<DType::bf16> {
  using type = bfloat16;
};
template <>
struct StorageType<DType::e4m3> {
  using type = float8_e4m3;
};
template <>
struct StorageType<DType::e5m2> {
  using type = float8_e5m2;
};
template <>
struct StorageType<DType::i32> {
  using type = int32_t;
};
template <>
struct StorageType<DType::i64> {
  using type = int64_t;
};
template <>
struct StorageType<DType::u8> {
  using type = uint8_t;
};
template <DType D>
using StorageOf = typename StorageType<D>::type;

static_assert(traits(DType::f16).max == 65504.0);
static_assert(traits(DType::e4m3).max == 448.0 && traits(DType::e5m2).max == 57344.0);
static_assert(traits(DType::e4m3).min_subnormal == 0x1p-9);
static_assert(traits(DType::bf16).min_subnormal == 0x1p-133);
static_assert(sizeof(StorageOf<DType::bf16>) == size_of(DType::bf16));

}  // namespace mixp
