#include "support/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mixp::test {

double slow_decode(const Format& f, uint32_t code) {
  const int E = f.exponent_bits, M = f.mantissa_bits;
  const bool negative = (code >> (E + M)) & 1u;
  const uint32_t exp_field = (code >> M) & ((1u << E) - 1);
  const uint32_t man = code & ((1u << M) - 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const uint32_t all_exp = (1u << E) - 1;
  if (f.nan == NanEncoding::ieee && exp_field == all_exp) {
    if (man == 0 && f.has_infinity) return negative ? -INFINITY : INFINITY;
    return nan;
  }
  if (f.nan == NanEncoding::all_ones && exp_field == all_exp && man == (1u << M) - 1) return nan;
  if (f.nan == NanEncoding::negative_zero && negative && exp_field == 0 && man == 0) return nan;
  double magnitude;
  if (exp_field == 0) {
    magnitude = f.subnormals ? std::pow(2.0, 1 - f.bias) * (double(man) / std::pow(2.0, M)) : 0.0;
  } else {
    magnitude = std::pow(2.0, int(exp_field) - f.bias) * (1.0 + double(man) / std::pow(2.0, M));
  }
  return negative ? -magnitude : magnitude;
}

ValueTable value_table(const Format& f) {
  const int magnitude_bits = f.exponent_bits + f.mantissa_bits;
  EXPECT_LE(magnitude_bits, 15);
  std::vector<std::pair<double, uint32_t>> entries;
  for (uint32_t code = 0; code < (1u << magnitude_bits); ++code) {
    const double v = slow_decode(f, code);
    if (std::isfinite(v)) {
      // Without subnormals, exponent field 0 holds zero only.
      if (!f.subnormals && code != 0 && (code >> f.mantissa_bits) == 0) continue;
      entries.emplace_back(v, code);
    }
  }
  std::sort(entries.begin(), entries.end());
  ValueTable t;
  for (auto& [v, c] : entries) {
    t.values.push_back(v);
    t.codes.push_back(c);
  }
  return t;
}

uint32_t oracle_encode(const Format& f, const ValueTable& t, double x, Rounding rounding,
                       Overflow overflow) {
  const bool negative = std::signbit(x);
  const double a = std::fabs(x);
  const uint32_t sign = negative ? (1u << (f.exponent_bits + f.mantissa_bits)) : 0u;
  auto with_sign = [&](uint32_t code) {
    if (code == 0 && f.nan == NanEncoding::negative_zero) return 0u;
    return sign | code;
  };
  const double max = t.values.back();
  // The value one step beyond max, as the unbounded exponent range would have it.
  const double beyond = max + std::ldexp(1.0, std::ilogb(max) - f.mantissa_bits);
  // Candidates: lo <= a <= hi, from the table extended by `beyond`.
  auto it = std::upper_bound(t.values.begin(), t.values.end(), a);
  size_t lo_index = size_t(it - t.values.begin()) - 1;
  double lo = t.values[lo_index], hi;
  bool hi_overflows = false;
  const uint32_t lo_code = t.codes[lo_index];
  uint32_t hi_code = 0;
  if (lo == a) return with_sign(lo_code);
  if (lo_index + 1 < t.values.size()) {
    hi = t.values[lo_index + 1];
    hi_code = t.codes[lo_index + 1];
  } else {
    hi = beyond;
    hi_overflows = true;
  }
  if (a > beyond) hi = INFINITY;  // lo is max: only rounding toward zero stays finite
  bool away;
  const bool toward_zero_mode = rounding == Rounding::toward_zero ||
                                (rounding == Rounding::up && negative) ||
                                (rounding == Rounding::down && !negative);
  if (rounding == Rounding::nearest_even) {
    const double mid = lo + (hi - lo) / 2;
    if (std::isinf(hi))
      away = true;
    else if (a != mid)
      away = a > mid;
    else
      away = hi_overflows ? ((lo_code & 1u) != 0) : ((hi_code & 1u) == 0);
  } else if (rounding == Rounding::odd) {
    // The neighbour with an odd code; beyond max, max (odd rounding never overflows).
    if ((lo_code & 1u) != 0 || hi_overflows) return with_sign(lo_code);
    return with_sign(hi_code);
  } else {
    EXPECT_NE(rounding, Rounding::stochastic) << "the oracle has no stochastic rounding";
    away = !toward_zero_mode;
  }
  if (!away) return with_sign(lo_code);
  if (!hi_overflows) return with_sign(hi_code);
  // Overflow.
  const uint32_t max_code = t.codes.back();
  if (overflow == Overflow::saturate || f.nan == NanEncoding::none) return with_sign(max_code);
  if (f.has_infinity) return sign | (((1u << f.exponent_bits) - 1) << f.mantissa_bits);
  if (f.nan == NanEncoding::all_ones)
    return sign | ((1u << (f.exponent_bits + f.mantissa_bits)) - 1);
  if (f.nan == NanEncoding::negative_zero) return 1u << (f.exponent_bits + f.mantissa_bits);
  return sign | (((1u << f.exponent_bits) - 1) << f.mantissa_bits) | (1u << (f.mantissa_bits - 1));
}

}  // namespace mixp::test
