// mixp/float_types.h — the storage types of the low-precision formats.
//
// float16, bfloat16, float8_e4m3 and float8_e5m2 are structs over their bits, never integer
// typedefs, so that a bf16 buffer cannot be mistaken for a uint16_t one. Converting to float is
// exact and implicit. Converting from float is explicit and rounds to nearest, ties to even:
// subnormals are kept (no flush-to-zero, no denormals-are-zero), the sign of zero is kept, and a
// NaN stays a NaN (a quiet one: the quiet bit is set and the top payload bits are kept). FP8
// conversions take an Overflow mode, because the OCP formats are used both ways:
//
//   Overflow::saturate    |x| rounding above max, and ±inf, give ±max
//   Overflow::inf_or_nan  they give ±inf where the format has one (E5M2), else NaN (E4M3)
//
// Overflow is decided after rounding, as if the exponent range were unbounded (IEEE 754, OCP
// OFP8 v1.0): 65519.99 is fp16 65504, 65520 is inf.
//
// Example:
//
//   mixp::bfloat16 b(3.14159f);                 // b.bits == 0x4049, float(b) == 3.140625f
//   mixp::float16 h = mixp::float16::from_bits(0x0001);
//   float tiny = h;                             // 2^-24, exact
//   mixp::float8_e4m3 q(500.0f, mixp::Overflow::saturate);      // 448
//   mixp::float8_e4m3 n(500.0f, mixp::Overflow::inf_or_nan);    // NaN (E4M3 has no infinity)
//
// All conversions are constexpr and branch on the value class only; bulk conversion of buffers
// lives in mixp/convert.h.
#pragma once

#include <bit>
#include <cstdint>

namespace mixp {

/// What a narrowing conversion does with values too large for the target format.
enum class Overflow : uint8_t {
  saturate = 0,    ///< overflow and ±inf go to ±max finite
  inf_or_nan = 1,  ///< overflow goes to ±inf, or to NaN where the format has no infinity
};

namespace detail {

/// How a format spends its all-ones exponent: IEEE style (inf and NaNs), or OCP E4M3 style
/// ("fn": finite, with NaN only at S.1111.111).
enum class SpecialCodes : uint8_t { ieee, finite_nan_at_all_ones };

/// fp32 bits -> bits of a narrower format with the fp32 exponent layout scaled down, rounded to
/// nearest even. Shared by fp16, E5M2 and E4M3; bfloat16 has its own shorter path below.
template <int ExpBits, int ManBits, SpecialCodes Specials>
constexpr uint32_t round_f32_bits_to_narrow(uint32_t x, Overflow overflow) {
  static_assert(ExpBits >= 2 && ExpBits <= 7 && ManBits >= 1 && ManBits <= 22);
  constexpr int bias = (1 << (ExpBits - 1)) - 1;
  constexpr int dropped = 23 - ManBits;  // mantissa bits dropped from a normal fp32 value
  constexpr uint32_t exp_all_ones = (1u << ExpBits) - 1;
  constexpr uint32_t man_mask = (1u << ManBits) - 1;
  constexpr bool ieee = Specials == SpecialCodes::ieee;
  constexpr uint32_t max_code = ieee ? (((exp_all_ones - 1) << ManBits) | man_mask)
                                     : ((exp_all_ones << ManBits) | (man_mask - 1));
  constexpr uint32_t all_ones_code = (exp_all_ones << ManBits) | man_mask;
  constexpr uint32_t inf_code = exp_all_ones << ManBits;
  // fp32 exponent field of the target's smallest normal, 2^(1 - bias).
  constexpr uint32_t min_normal_f32_exp = 127 - bias + 1;

  const uint32_t sign = (x >> 31) << (ExpBits + ManBits);
  const uint32_t a = x & 0x7fffffffu;

  if (a > 0x7f800000u) {  // NaN: quiet, with the top payload bits where the format has room
    if constexpr (ieee) {
      return sign | inf_code | (1u << (ManBits - 1)) | ((a >> dropped) & man_mask);
    } else {
      return sign | all_ones_code;
    }
  }
  const uint32_t on_overflow = overflow == Overflow::saturate ? (sign | max_code)
                               : ieee                         ? (sign | inf_code)
                                                              : (sign | all_ones_code);
  if (a == 0x7f800000u) return on_overflow;

  uint32_t code;
  if ((a >> 23) >= min_normal_f32_exp) {
    // Normal in the target: round the fp32 mantissa at bit `dropped`, then rebias. A carry out
    // of the mantissa bumps the exponent, which is exactly the rounding we want.
    const uint32_t rounded = a + ((1u << (dropped - 1)) - 1) + ((a >> dropped) & 1u);
    code = (rounded >> dropped) - (uint32_t(127 - bias) << ManBits);
  } else {
    // Subnormal in the target: the code is the value in units of the smallest subnormal,
    // 2^(1 - bias - ManBits), rounded to nearest even. fp32 subnormal inputs are far below
    // half that unit for every format this template serves, so they round to zero.
    const uint32_t exp = a >> 23;
    const uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    const int shift = 151 - bias - ManBits - int(exp);  // code = sig * 2^-shift
    if (exp == 0 || shift > 25) return sign;
    const uint32_t trunc = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    code = trunc + ((rem > half || (rem == half && (trunc & 1u))) ? 1u : 0u);
  }
  return code > max_code ? on_overflow : (sign | code);
}

/// Bits of a narrow format (same layout rules as above) -> fp32 bits. Exact.
template <int ExpBits, int ManBits, SpecialCodes Specials>
constexpr uint32_t widen_narrow_bits_to_f32(uint32_t code) {
  constexpr int bias = (1 << (ExpBits - 1)) - 1;
  constexpr uint32_t exp_all_ones = (1u << ExpBits) - 1;
  constexpr uint32_t man_mask = (1u << ManBits) - 1;
  const uint32_t sign = ((code >> (ExpBits + ManBits)) & 1u) << 31;
  const uint32_t e = (code >> ManBits) & exp_all_ones;
  const uint32_t m = code & man_mask;
  if constexpr (Specials == SpecialCodes::ieee) {
    if (e == exp_all_ones) {
      return m == 0 ? (sign | 0x7f800000u) : (sign | 0x7fc00000u | (m << (23 - ManBits)));
    }
  } else {
    if (e == exp_all_ones && m == man_mask) return sign | 0x7fc00000u;
  }
  if (e != 0) return sign | ((e + 127 - bias) << 23) | (m << (23 - ManBits));
  if (m == 0) return sign;
  // Subnormal: m * 2^(1 - bias - ManBits) is a normal fp32 value; normalize it.
  const int top = int(std::bit_width(m)) - 1;  // value = 2^(top + 1 - bias - ManBits) * 1.xxx
  const uint32_t f32_exp = uint32_t(top + 1 - bias - ManBits + 127);
  const uint32_t f32_man = (m << (23 - top)) & 0x7fffffu;
  return sign | (f32_exp << 23) | f32_man;
}

constexpr uint16_t round_f32_bits_to_bf16(uint32_t x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  // Round to nearest even at bit 16; this also carries into the exponent and up to inf.
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// Stochastic rounding to bfloat16: rounds away from zero with probability equal to the
/// distance from the value below (toward zero) divided by the gap, using the low 16 bits of
/// `random` as a uniform draw from [0, 2^16). Exact: the dropped bits are 16 bits wide.
constexpr uint16_t round_f32_bits_to_bf16_stochastic(uint32_t x, uint32_t random) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  if ((x & 0x7fffffffu) == 0x7f800000u) return uint16_t(x >> 16);
  return uint16_t((x + (random & 0xffffu)) >> 16);
}

}  // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits; max 65504.
struct float16 {
  uint16_t bits = 0;

  constexpr float16() = default;
  explicit constexpr float16(float x)
      : bits(uint16_t(detail::round_f32_bits_to_narrow<5, 10, detail::SpecialCodes::ieee>(
            std::bit_cast<uint32_t>(x), Overflow::inf_or_nan))) {}
  static constexpr float16 from_bits(uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const {
    return std::bit_cast<float>(
        detail::widen_narrow_bits_to_f32<5, 10, detail::SpecialCodes::ieee>(bits));
  }
};

/// bfloat16: 1 sign, 8 exponent, 7 mantissa bits; the range of fp32 with 8 bits of precision.
struct bfloat16 {
  uint16_t bits = 0;

  constexpr bfloat16() = default;
  explicit constexpr bfloat16(float x)
      : bits(detail::round_f32_bits_to_bf16(std::bit_cast<uint32_t>(x))) {}
  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  /// Stochastic rounding; `random` is a uniform 32-bit draw, of which 16 bits are used.
  static constexpr bfloat16 round_stochastic(float x, uint32_t random) {
    return from_bits(detail::round_f32_bits_to_bf16_stochastic(std::bit_cast<uint32_t>(x), random));
  }
  constexpr operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
};

/// OCP OFP8 E4M3 ("e4m3fn"): 1 sign, 4 exponent, 3 mantissa bits, bias 7; max 448, no
/// infinity, NaN only at S.1111.111.
struct float8_e4m3 {
  uint8_t bits = 0;

  constexpr float8_e4m3() = default;
  constexpr float8_e4m3(float x, Overflow overflow)
      : bits(uint8_t(
            detail::round_f32_bits_to_narrow<4, 3, detail::SpecialCodes::finite_nan_at_all_ones>(
                std::bit_cast<uint32_t>(x), overflow))) {}
  static constexpr float8_e4m3 from_bits(uint8_t b) {
    float8_e4m3 q;
    q.bits = b;
    return q;
  }
  constexpr operator float() const {
    return std::bit_cast<float>(
        detail::widen_narrow_bits_to_f32<4, 3, detail::SpecialCodes::finite_nan_at_all_ones>(bits));
  }
};

/// OCP OFP8 E5M2: 1 sign, 5 exponent, 2 mantissa bits, bias 15; max 57344, IEEE-style
/// infinities and NaNs.
struct float8_e5m2 {
  uint8_t bits = 0;

  constexpr float8_e5m2() = default;
  constexpr float8_e5m2(float x, Overflow overflow)
      : bits(uint8_t(detail::round_f32_bits_to_narrow<5, 2, detail::SpecialCodes::ieee>(
            std::bit_cast<uint32_t>(x), overflow))) {}
  static constexpr float8_e5m2 from_bits(uint8_t b) {
    float8_e5m2 q;
    q.bits = b;
    return q;
  }
  constexpr operator float() const {
    return std::bit_cast<float>(
        detail::widen_narrow_bits_to_f32<5, 2, detail::SpecialCodes::ieee>(bits));
  }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2);
static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1);

}  // namespace mixp
