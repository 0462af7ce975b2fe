// mixp/format.h — emulation of any small binary floating-point format.
//
// A Format describes a signed binary format with `exponent_bits` and `mantissa_bits` (any eXmY
// with X <= 8 and Y <= 23, so that every value is an fp32 value), its exponent bias, whether it
// has infinities, how it encodes NaN and whether it has subnormals. The emulator rounds fp32
// values into the format with any Rounding and either Overflow mode, exactly: the rounding is
// done on the integer significand, never in floating point, so the result is the same on every
// machine and under any FPU mode.
//
// It covers the formats mixp stores (fp16, bf16, OCP E4M3 and E5M2, where it agrees bit for bit
// with mixp/float_types.h) and the OCP Microscaling element formats FP6 (E3M2, E2M3) and FP4
// (E2M1), which have neither infinities nor NaN.
//
// Example:
//
//   using namespace mixp;
//   Format fp4 = Format::e2m1();
//   float y = round_to_format(fp4, 0.3f, Rounding::nearest_even, Overflow::saturate);  // 0.5
//   float z = round_to_format(fp4, 9.0f, Rounding::nearest_even, Overflow::saturate);  // 6
//   uint32_t code = encode(fp4, -1.5f, Rounding::nearest_even, Overflow::saturate);    // 0b1011
//   Format e3m4 = parse_format("e3m4");          // any eXmY: IEEE-style, bias 2^(X-1) - 1
//
// Stochastic rounding takes a uniform 32-bit random number per value (see mixp/random.h):
// it rounds away from zero with probability (|x| - lo) / (hi - lo), where lo and hi are the
// neighbours of x in the format. The probability is exact when at most 32 bits are dropped
// (always, for fp32 -> bf16 and fp16 of normal values), and otherwise truncated to 32 bits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixp/float_types.h"
#include "mixp/random.h"

namespace mixp {

enum class Rounding : uint8_t {
  nearest_even = 0,  ///< to nearest, ties to the even neighbour (the IEEE default)
  toward_zero = 1,   ///< truncation
  up = 2,            ///< toward +infinity
  down = 3,          ///< toward -infinity
  stochastic = 4,    ///< away from zero with probability proportional to the distance
  odd = 5,           ///< truncate, then set the last bit if anything was dropped (von Neumann)
};

/// Where a format keeps its NaNs.
enum class NanEncoding : uint8_t {
  ieee = 0,           ///< exponent all ones, mantissa not zero (fp16, bf16, E5M2)
  all_ones = 1,       ///< only S.1...1 (OCP E4M3); the rest of the top exponent holds numbers
  negative_zero = 2,  ///< the code 1000...0, so the format has no -0 (the "fnuz" formats)
  none = 3,           ///< no NaN at all (OCP MX FP6 and FP4)
};

struct Format {
  int exponent_bits = 8;
  int mantissa_bits = 7;
  int bias = 127;
  bool has_infinity = true;
  NanEncoding nan = NanEncoding::ieee;
  bool subnormals = true;  ///< false: results below the smallest normal become (signed) zero

  /// IEEE-754-style eXmY: bias 2^(X-1) - 1, infinities and IEEE NaNs, subnormals.
  static Format ieee_like(int exponent_bits, int mantissa_bits);
  static Format fp32() { return ieee_like(8, 23); }
  static Format fp16() { return ieee_like(5, 10); }
  static Format bf16() { return ieee_like(8, 7); }
  static Format e4m3();  ///< OCP OFP8 E4M3: bias 7, no infinity, NaN at all ones
  static Format e5m2() { return ieee_like(5, 2); }
  static Format e3m2();      ///< OCP MX FP6 E3M2: bias 3, no infinity, no NaN
  static Format e2m3();      ///< OCP MX FP6 E2M3: bias 1, no infinity, no NaN
  static Format e2m1();      ///< OCP MX FP4 E2M1: bias 1, no infinity, no NaN
  static Format e4m3fnuz();  ///< E4M3, bias 8, no infinity, no -0: NaN at 0x80 (AMD, Graphcore)
  static Format e5m2fnuz();  ///< E5M2, bias 16, no infinity, no -0: NaN at 0x80

  /// Throws mixp::Error when the fields do not describe a format the emulator can represent.
  void validate() const;

  int total_bits() const { return 1 + exponent_bits + mantissa_bits; }
  double max() const;            ///< largest finite value
  double min_normal() const;     ///< 2^(1 - bias)
  double min_subnormal() const;  ///< 2^(1 - bias - mantissa_bits); min_normal() if no subnormals
  double epsilon() const;        ///< 2^-mantissa_bits
  /// "e4m3" for the named formats, otherwise "eXmY" followed by the fields that differ from
  /// ieee_like(X, Y), such as "e4m3(bias=8,nan=negative_zero,no_inf)".
  std::string name() const;

  friend bool operator==(const Format&, const Format&) = default;
};

/// The named formats, widest first: f32, f16, bf16, e4m3, e5m2, e3m2, e2m3, e2m1, e4m3fnuz,
/// e5m2fnuz.
std::vector<Format> standard_formats();

/// A format by name: "f32"/"fp32", "f16"/"fp16", "bf16", "e4m3", "e5m2", "e3m2", "e2m3",
/// "e2m1", "e4m3fnuz", "e5m2fnuz", or any "eXmY" (IEEE-style). Throws mixp::Error otherwise.
Format parse_format(std::string_view name);
/// A rounding mode by name: "nearest_even" (or "rne"), "toward_zero" (or "rtz"), "up", "down",
/// "stochastic" (or "sr"), "odd". Throws mixp::Error otherwise.
Rounding parse_rounding(std::string_view name);
const char* name_of(Rounding rounding);

/// Rounds `x` into `format` and returns the code: sign bit on top, then exponent, then
/// mantissa, in the low total_bits() bits. `random` is used by Rounding::stochastic only.
/// Throws mixp::Error for a NaN input when the format has no NaN.
uint32_t encode(const Format& format, float x, Rounding rounding, Overflow overflow,
                uint32_t random = 0);
/// The value of `code` in `format`, exactly, as fp32 (a NaN decodes to a quiet fp32 NaN).
/// Throws mixp::Error when `code` has bits above total_bits().
float decode(const Format& format, uint32_t code);
/// decode(encode(x)), except that a NaN stays NaN in a format without NaN.
float round_to_format(const Format& format, float x, Rounding rounding, Overflow overflow,
                      uint32_t random = 0);

/// Rounds a buffer in place or into `out` (same size; may be the same buffer). Stochastic
/// rounding draws element i's random number from `philox` at offset `philox.offset + i`, so the
/// result depends on the seed, stream and offset but not on how the work is split.
void round_to_format(const Format& format, std::span<const float> in, std::span<float> out,
                     Rounding rounding, Overflow overflow, const PhiloxState& philox = {});

}  // namespace mixp
