// The scale rules of FP8 quantization, pure functions on floats: what the quantization kernels
// apply per tensor and per block, and what amp's recipe functions (mixp/amp/fp8.h, which states
// the rules with their edge cases) return.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "kernels/fp8.h"
#include "mixp/error.h"

namespace mixp::kernels {

float fp8_max(DType fp8) {
  MIXP_CHECK(fp8 == DType::e4m3 || fp8 == DType::e5m2, "fp8_max: ", name_of(fp8),
             " is not an fp8 dtype (e4m3, e5m2)");
  return float(traits(fp8).max);
}

float scale_from_amax(float amax, float max, int margin, float previous) {
  // amax 0: nothing to scale for (no data yet, or all zeros); non-finite: the amax says nothing
  // about the finite values. Either way the previous scale is the best guess.
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  const float scale = std::ldexp(max / amax, -margin);
  // A tiny amax (a subnormal) overflows the quotient; the largest finite scale keeps the
  // tensor's values as large as fp32 allows. A huge margin can underflow it to 0: the smallest
  // positive scale then.
  if (std::isinf(scale)) return FLT_MAX;
  if (scale == 0.0f) return std::numeric_limits<float>::denorm_min();
  return scale;
}

float current_scale(float amax, float max, int margin) {
  return scale_from_amax(amax, max, margin, 1.0f);
}

int mx_emax(DType element) {
  MIXP_CHECK(element == DType::e4m3 || element == DType::e5m2, "mx_emax: ", name_of(element),
             " is not an MX element format here (e4m3, e5m2)");
  return element == DType::e4m3 ? 8 : 15;
}

uint8_t e8m0_scale_code(float amax, int emax, float max, MxRounding rounding) {
  if (!std::isfinite(amax)) return 0xFF;
  const float a = std::fabs(amax);
  if (a == 0.0f) return 0;  // the smallest scale; the block's elements are all zero
  // floor(log2(a)) exactly, from the fp32 exponent (ilogb also handles subnormals).
  int shared = std::ilogb(a) - emax;
  // Rounding up: max * 2^shared has a's exponent and max's significand (1.75 for E4M3 and
  // E2M1), so the smallest e with a <= max * 2^e is shared or shared + 1. The comparison is
  // exact in double, where max * 2^shared neither overflows nor underflows. This is the exact
  // ceil(log2(a / max)); Transformer Engine rounds the fp32 quotient a / max up instead, which
  // can differ only when that quotient rounds onto a power of two.
  if (rounding == MxRounding::up && double(a) > std::ldexp(double(max), shared)) ++shared;
  return uint8_t(std::clamp(shared, -127, 127) + 127);
}

uint8_t mx_scale_code(float amax, DType element, MxRounding rounding) {
  return e8m0_scale_code(amax, mx_emax(element), fp8_max(element), rounding);
}

float e8m0_value(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(code) - 127);
}

}  // namespace mixp::kernels
