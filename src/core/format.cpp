// The generic format emulator. It works on the exact value of the fp32 input, sig * 2^e, with
// integer arithmetic only: find the quantum of the target at that magnitude, split the
// significand into the kept part and the dropped remainder, and let the rounding mode decide
// from the remainder. Overflow is decided on the rounded code, as if the exponent were
// unbounded.
#include "mixp/format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "mixp/error.h"

namespace mixp {
namespace {

bool dropped_part_rounds_away(Rounding rounding, bool negative, uint64_t kept, uint64_t rem,
                              int rem_bits, uint32_t random) {
  if (rem == 0) return false;
  switch (rounding) {
    case Rounding::nearest_even: {
      const uint64_t half = uint64_t(1) << (rem_bits - 1);
      return rem > half || (rem == half && (kept & 1u));
    }
    case Rounding::toward_zero: return false;
    case Rounding::up: return !negative;
    case Rounding::down: return negative;
    case Rounding::odd: return false;  // the caller sets the last bit instead
    case Rounding::stochastic: {
      // P(away) = rem / 2^rem_bits, as a 32-bit fixed-point threshold (truncated if wider).
      const uint64_t threshold =
          rem_bits <= 32 ? (rem << (32 - rem_bits)) : (rem >> (rem_bits - 32));
      return uint64_t(random) < threshold;
    }
  }
  return false;
}

// Codes of the format's special values and limits, derived once from the fields.
struct Layout {
  int e, m;
  uint32_t sign_bit;
  uint32_t exp_all_ones;
  uint32_t max_code = 0;  // largest finite magnitude code
  explicit Layout(const Format& f)
      : e(f.exponent_bits),
        m(f.mantissa_bits),
        sign_bit(1u << (f.exponent_bits + f.mantissa_bits)),
        exp_all_ones((1u << f.exponent_bits) - 1) {
    const uint32_t all_ones = sign_bit - 1;
    switch (f.nan) {
      case NanEncoding::ieee: max_code = ((exp_all_ones - 1) << m) | ((1u << m) - 1); break;
      case NanEncoding::all_ones: max_code = all_ones - 1; break;
      case NanEncoding::negative_zero:
      case NanEncoding::none: max_code = all_ones; break;
    }
  }
};

uint32_t nan_code(const Format& f, const Layout& l, uint32_t negative, uint32_t f32_abs) {
  switch (f.nan) {
    case NanEncoding::ieee: {
      // Quiet, with the top payload bits, as F16C and the bf16 instructions do.
      const uint32_t payload = (f32_abs >> (23 - l.m)) & ((1u << l.m) - 1);
      return (negative ? l.sign_bit : 0u) | (l.exp_all_ones << l.m) | (1u << (l.m - 1)) | payload;
    }
    case NanEncoding::all_ones: return (negative ? l.sign_bit : 0u) | (l.sign_bit - 1);
    case NanEncoding::negative_zero: return l.sign_bit;
    case NanEncoding::none: break;
  }
  MIXP_CHECK(false, "encode: NaN has no encoding in format ", f.name(),
             ", which has no NaN; use round_to_format to keep NaN as an fp32 NaN");
  return 0;
}

uint32_t overflow_code(const Format& f, const Layout& l, bool negative, Rounding rounding,
                       Overflow overflow) {
  const uint32_t sign = negative ? l.sign_bit : 0u;
  // IEEE 754 7.4: the directed roundings carry an overflow toward zero to the largest finite
  // number. Round-to-odd does the same, so that a later rounding still sees an inexact max.
  const bool toward_zero = rounding == Rounding::toward_zero || rounding == Rounding::odd ||
                           (rounding == Rounding::up && negative) ||
                           (rounding == Rounding::down && !negative);
  if (overflow == Overflow::saturate || toward_zero || f.nan == NanEncoding::none) {
    return sign | l.max_code;
  }
  if (f.has_infinity) return sign | (l.exp_all_ones << l.m);
  return nan_code(f, l, negative, 0x7fc00000u);
}

uint32_t zero_code(const Format& f, const Layout& l, bool negative) {
  // Formats whose NaN is the negative-zero code have only +0.
  return (negative && f.nan != NanEncoding::negative_zero) ? l.sign_bit : 0u;
}

uint32_t encode_with(const Format& f, const Layout& l, float x, Rounding rounding,
                     Overflow overflow, uint32_t random) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const bool negative = (bits >> 31) != 0;
  const uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return nan_code(f, l, negative, a);
  if (a == 0x7f800000u) {
    if (f.has_infinity && overflow == Overflow::inf_or_nan) {
      return (negative ? l.sign_bit : 0u) | (l.exp_all_ones << l.m);
    }
    return overflow_code(f, l, negative, Rounding::nearest_even, overflow);
  }
  if (a == 0) return zero_code(f, l, negative);

  // |x| = sig * 2^exp2, exactly.
  const uint32_t f32_exp = a >> 23;
  const uint64_t sig = f32_exp == 0 ? (a & 0x7fffffu) : ((a & 0x7fffffu) | 0x800000u);
  const int exp2 = f32_exp == 0 ? -149 : int(f32_exp) - 150;
  const int magnitude = exp2 + int(std::bit_width(sig)) - 1;  // floor(log2 |x|)
  const int emin = 1 - f.bias;
  const bool below_normal = magnitude < emin;
  // Exponent whose quantum applies: subnormals share the quantum of the smallest normal.
  const int target_exp = (below_normal && f.subnormals) ? emin : magnitude;
  const int quantum_exp = target_exp - l.m;
  const int shift = std::min(quantum_exp - exp2, 56);  // past 56, everything is dropped anyway

  uint64_t kept, rem = 0;
  int rem_bits = 0;
  if (shift <= 0) {
    kept = sig << -shift;
  } else {
    kept = sig >> shift;
    rem = sig & ((uint64_t(1) << shift) - 1);
    rem_bits = shift;
  }
  if (rounding == Rounding::odd && rem != 0) kept |= 1u;
  if (dropped_part_rounds_away(rounding, negative, kept, rem, rem_bits, random)) ++kept;

  uint64_t code;
  if (below_normal && !f.subnormals) {
    // Rounded at the precision of normals; a result still below the smallest normal is zero.
    const bool carried = (kept >> (l.m + 1)) != 0;
    if (!carried || magnitude + 1 < emin) return zero_code(f, l, negative);
    code = uint64_t(1) << l.m;  // exactly the smallest normal
  } else {
    // kept is the significand with its leading one at bit m (or below, for subnormals); a
    // carry to bit m+1 moves into the exponent field by itself.
    code = (uint64_t(target_exp + f.bias) << l.m) + kept - (uint64_t(1) << l.m);
  }
  if (code == 0) return zero_code(f, l, negative);
  if (code > l.max_code) return overflow_code(f, l, negative, rounding, overflow);
  return (negative ? l.sign_bit : 0u) | uint32_t(code);
}

float decode_with(const Format& f, const Layout& l, uint32_t code) {
  const bool negative = (code & l.sign_bit) != 0;
  const uint32_t magnitude = code & (l.sign_bit - 1);
  const uint32_t exp_field = magnitude >> l.m;
  const uint32_t mantissa = magnitude & ((1u << l.m) - 1);
  const uint32_t f32_sign = negative ? 0x80000000u : 0u;
  const float quiet_nan = std::bit_cast<float>(f32_sign | 0x7fc00000u);
  switch (f.nan) {
    case NanEncoding::ieee:
      if (exp_field == l.exp_all_ones) {
        if (mantissa == 0 && f.has_infinity) return std::bit_cast<float>(f32_sign | 0x7f800000u);
        return std::bit_cast<float>(f32_sign | 0x7fc00000u | (mantissa << (23 - l.m)));
      }
      break;
    case NanEncoding::all_ones:
      if (magnitude == l.sign_bit - 1) return quiet_nan;
      break;
    case NanEncoding::negative_zero:
      if (code == l.sign_bit) return std::bit_cast<float>(0x7fc00000u);
      break;
    case NanEncoding::none: break;
  }
  double value;
  if (exp_field == 0 && f.subnormals) {
    value = std::ldexp(double(mantissa), 1 - f.bias - l.m);
  } else if (exp_field == 0) {
    // Without subnormals, exponent field 0 holds only zero (the mantissa is ignored).
    value = 0.0;
  } else {
    value = std::ldexp(double((1u << l.m) | mantissa), int(exp_field) - f.bias - l.m);
  }
  const float result = float(value);  // exact: validate() keeps every value inside fp32
  return negative ? -result : result;
}

}  // namespace

Format Format::ieee_like(int exponent_bits, int mantissa_bits) {
  Format f;
  f.exponent_bits = exponent_bits;
  f.mantissa_bits = mantissa_bits;
  f.bias = (1 << (exponent_bits - 1)) - 1;
  f.has_infinity = true;
  f.nan = NanEncoding::ieee;
  f.subnormals = true;
  return f;
}

namespace {
Format finite_format(int e, int m, NanEncoding nan) {
  Format f = Format::ieee_like(e, m);
  f.has_infinity = false;
  f.nan = nan;
  return f;
}
}  // namespace

Format Format::e4m3() { return finite_format(4, 3, NanEncoding::all_ones); }
Format Format::e3m2() { return finite_format(3, 2, NanEncoding::none); }
Format Format::e2m3() { return finite_format(2, 3, NanEncoding::none); }
Format Format::e2m1() { return finite_format(2, 1, NanEncoding::none); }

void Format::validate() const {
  MIXP_CHECK(exponent_bits >= 1 && exponent_bits <= 8, "format: exponent_bits must be 1..8, got ",
             exponent_bits);
  MIXP_CHECK(mantissa_bits >= 0 && mantissa_bits <= 23, "format: mantissa_bits must be 0..23, got ",
             mantissa_bits);
  MIXP_CHECK(!has_infinity || nan == NanEncoding::ieee,
             "format: infinities need the IEEE NaN encoding (exponent all ones)");
  MIXP_CHECK(nan != NanEncoding::ieee || mantissa_bits >= 1,
             "format: the IEEE NaN encoding needs at least one mantissa bit");
  MIXP_CHECK(nan != NanEncoding::all_ones || exponent_bits + mantissa_bits >= 2,
             "format: a NaN at all ones needs at least two bits besides the sign");
  // Every value must be an fp32 value: the largest below 2^128, the smallest at least 2^-149.
  const int top_exp_field = int((1u << exponent_bits) - 1) - (nan == NanEncoding::ieee ? 1 : 0);
  const int emax = top_exp_field - bias;
  MIXP_CHECK(emax <= 127, "format: bias ", bias, " puts the largest exponent at 2^", emax,
             ", above fp32's 2^127");
  const int lowest_exp = (subnormals ? 1 - bias - mantissa_bits : 1 - bias);
  MIXP_CHECK(lowest_exp >= -149, "format: bias ", bias, " puts the smallest value at 2^",
             lowest_exp, ", below fp32's 2^-149");
  MIXP_CHECK(top_exp_field >= 1, "format: the format has no normal numbers");
}

double Format::max() const {
  const Layout l(*this);
  return double(decode_with(*this, l, l.max_code));
}
double Format::min_normal() const { return std::ldexp(1.0, 1 - bias); }
double Format::min_subnormal() const {
  return subnormals ? std::ldexp(1.0, 1 - bias - mantissa_bits) : min_normal();
}
double Format::epsilon() const { return std::ldexp(1.0, -mantissa_bits); }

namespace {
struct NamedFormat {
  std::string_view name;
  std::string_view alias;
  Format format;
};
std::span<const NamedFormat> named_formats() {
  static const NamedFormat kNamed[] = {
      {.name = "f32", .alias = "fp32", .format = Format::fp32()},
      {.name = "f16", .alias = "fp16", .format = Format::fp16()},
      {.name = "bf16", .alias = "bfloat16", .format = Format::bf16()},
      {.name = "e4m3", .alias = "fp8_e4m3", .format = Format::e4m3()},
      {.name = "e5m2", .alias = "fp8_e5m2", .format = Format::e5m2()},
      {.name = "e3m2", .alias = "fp6_e3m2", .format = Format::e3m2()},
      {.name = "e2m3", .alias = "fp6_e2m3", .format = Format::e2m3()},
      {.name = "e2m1", .alias = "fp4_e2m1", .format = Format::e2m1()},
      {.name = "e4m3fnuz", .alias = "fp8_e4m3fnuz", .format = Format::e4m3fnuz()},
      {.name = "e5m2fnuz", .alias = "fp8_e5m2fnuz", .format = Format::e5m2fnuz()},
  };
  return kNamed;
}
}  // namespace

std::vector<Format> standard_formats() {
  std::vector<Format> formats;
  for (const NamedFormat& n : named_formats()) formats.push_back(n.format);
  return formats;
}

Format Format::e4m3fnuz() {
  Format f = finite_format(4, 3, NanEncoding::negative_zero);
  f.bias = 8;
  return f;
}
Format Format::e5m2fnuz() {
  Format f = finite_format(5, 2, NanEncoding::negative_zero);
  f.bias = 16;
  return f;
}

std::string Format::name() const {
  for (const NamedFormat& n : named_formats()) {
    if (n.format == *this) return std::string(n.name);
  }
  std::ostringstream out;
  out << 'e' << exponent_bits << 'm' << mantissa_bits;
  const Format plain = ieee_like(exponent_bits, mantissa_bits);
  const char* separator = "(";
  auto add = [&](const auto&... parts) {
    out << separator;
    (out << ... << parts);
    separator = ",";
  };
  if (bias != plain.bias) add("bias=", bias);
  if (nan == NanEncoding::all_ones) add("nan=all_ones");
  if (nan == NanEncoding::negative_zero) add("nan=negative_zero");
  if (nan == NanEncoding::none) add("nan=none");
  if (!has_infinity) add("no_inf");
  if (!subnormals) add("no_subnormals");
  if (*separator == ',') out << ')';
  return out.str();
}

Format parse_format(std::string_view name) {
  for (const NamedFormat& n : named_formats()) {
    if (name == n.name || name == n.alias) return n.format;
  }
  // eXmY
  auto parse_int = [](std::string_view digits, int& out) {
    if (digits.empty() || digits.size() > 2) return false;
    out = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    return true;
  };
  int e = 0, m = 0;
  const size_t m_pos = name.find('m');
  const bool shaped = name.size() >= 4 && name[0] == 'e' && m_pos != std::string_view::npos &&
                      parse_int(name.substr(1, m_pos - 1), e) &&
                      parse_int(name.substr(m_pos + 1), m);
  MIXP_CHECK(shaped, "unknown format '", name,
             "'; known: f32, f16, bf16, e4m3, e5m2, e3m2, e2m3, e2m1, e4m3fnuz, e5m2fnuz, "
             "or eXmY with X in 1..8 and Y in 0..23");
  MIXP_CHECK(e >= 2 && e <= 8 && m >= 1 && m <= 23, "format '", name,
             "': an IEEE-style eXmY needs X in 2..8 and Y in 1..23");
  Format f = Format::ieee_like(e, m);
  f.validate();
  return f;
}

Rounding parse_rounding(std::string_view name) {
  if (name == "nearest_even" || name == "rne") return Rounding::nearest_even;
  if (name == "toward_zero" || name == "rtz") return Rounding::toward_zero;
  if (name == "up") return Rounding::up;
  if (name == "down") return Rounding::down;
  if (name == "stochastic" || name == "sr") return Rounding::stochastic;
  if (name == "odd") return Rounding::odd;
  MIXP_CHECK(false, "unknown rounding '", name,
             "'; known: nearest_even, toward_zero, up, down, stochastic, odd");
  return Rounding::nearest_even;  // unreachable
}

const char* name_of(Rounding rounding) {
  switch (rounding) {
    case Rounding::nearest_even: return "nearest_even";
    case Rounding::toward_zero: return "toward_zero";
    case Rounding::up: return "up";
    case Rounding::down: return "down";
    case Rounding::stochastic: return "stochastic";
    case Rounding::odd: return "odd";
  }
  return "unknown";
}

uint32_t encode(const Format& format, float x, Rounding rounding, Overflow overflow,
                uint32_t random) {
  format.validate();
  return encode_with(format, Layout(format), x, rounding, overflow, random);
}

float decode(const Format& format, uint32_t code) {
  format.validate();
  MIXP_CHECK(format.total_bits() == 32 || (code >> format.total_bits()) == 0, "decode: code 0x",
             std::hex, code, std::dec, " has more than the ", format.total_bits(),
             " bits of format ", format.name());
  return decode_with(format, Layout(format), code);
}

float round_to_format(const Format& format, float x, Rounding rounding, Overflow overflow,
                      uint32_t random) {
  if (std::isnan(x) && format.nan == NanEncoding::none) return x;
  return decode(format, encode(format, x, rounding, overflow, random));
}

void round_to_format(const Format& format, std::span<const float> in, std::span<float> out,
                     Rounding rounding, Overflow overflow, const PhiloxState& philox) {
  MIXP_CHECK(in.size() == out.size(), "round_to_format: input has ", in.size(),
             " elements but output has ", out.size());
  format.validate();
  const Layout layout(format);
  constexpr size_t kChunk = 1024;
  uint32_t random[kChunk] = {};
  for (size_t start = 0; start < in.size(); start += kChunk) {
    const size_t count = std::min(kChunk, in.size() - start);
    if (rounding == Rounding::stochastic) philox_words(philox, start, random, count);
    for (size_t i = 0; i < count; ++i) {
      const float x = in[start + i];
      if (std::isnan(x) && format.nan == NanEncoding::none) {
        out[start + i] = x;
        continue;
      }
      out[start + i] = decode_with(format, layout,
                                   encode_with(format, layout, x, rounding, overflow, random[i]));
    }
  }
}

}  // namespace mixp
