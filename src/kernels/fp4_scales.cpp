// The scale rules of FP4 block quantization and the branch-free E2M1 rounding the fast kernels
// use, pure functions on floats; mixp/amp/fp4.h states the rules with their edge cases.
#include <cfloat>
#include <cmath>
#include <limits>

#include "kernels/fp4.h"
#include "mixp/float_types.h"

namespace mixp::kernels {

int64_t fp4_block(Fp4Kind kind) { return kind == Fp4Kind::nvfp4 ? kNvfp4Block : kMxfp4Block; }

float e2m1_value(uint8_t code) {
  static constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitudes[code & 7u];
  return (code & 8u) ? -m : m;
}

uint8_t e2m1_round_nearest(float y) {
  // The code of |y| counts the midpoints between neighbours that |y| has passed. A tie goes to
  // the even code: > at a midpoint whose lower neighbour is even (0.25, 1.25, 2.5, 5), >= where
  // the upper one is (0.75, 1.75, 3.5). Beyond 5 everything is code 7 (6): saturation.
  const float a = std::fabs(y);
  const uint32_t code = uint32_t(a > 0.25f) + uint32_t(a >= 0.75f) + uint32_t(a > 1.25f) +
                        uint32_t(a >= 1.75f) + uint32_t(a > 2.5f) + uint32_t(a >= 3.5f) +
                        uint32_t(a > 5.0f);
  return uint8_t(code | (std::signbit(y) ? 8u : 0u));
}

uint8_t e2m1_round_stochastic(float y, uint32_t random) {
  const float a = std::fabs(y);
  uint32_t code;
  if (!(a < kE2m1Max)) {
    code = 7;  // 6 and beyond saturate (the next step up would overflow)
  } else {
    // lo = the grid value at or below a, gap = the distance to the next one (a power of two);
    // a - lo and the division by the gap are exact, and so is the scaling by 2^32, so the
    // threshold's integer part is floor(2^32 (a - lo) / gap), format.h's fixed-point probability.
    const uint32_t lo_code = uint32_t(a >= 0.5f) + uint32_t(a >= 1.0f) + uint32_t(a >= 1.5f) +
                             uint32_t(a >= 2.0f) + uint32_t(a >= 3.0f) + uint32_t(a >= 4.0f);
    const float gap = lo_code < 4 ? 0.5f : lo_code < 6 ? 1.0f : 2.0f;
    const float threshold = (a - e2m1_value(uint8_t(lo_code))) / gap * 4294967296.0f;
    code = lo_code + uint32_t(uint64_t(random) < uint64_t(threshold));
  }
  return uint8_t(code | (std::signbit(y) ? 8u : 0u));
}

float nvfp4_tensor_scale(float amax) {
  // A NaN or infinite amax says nothing about the finite values (and NaN blocks carry their
  // own NaN scale): 1, as Transformer Engine does for an infinite one.
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  const float scale = (448.0f * kE2m1Max) / amax;
  return std::isinf(scale) ? FLT_MAX : scale;
}

uint8_t nvfp4_block_scale_code(float block_amax, float tensor_scale) {
  if (!std::isfinite(block_amax)) return 0x7F;
  return float8_e4m3(block_amax / kE2m1Max * tensor_scale, Overflow::saturate).bits;
}

float nvfp4_element_scale(uint8_t scale_code, float tensor_scale) {
  const float decode = float(float8_e4m3::from_bits(scale_code));
  return decode == 0.0f ? 0.0f : tensor_scale / decode;
}

uint8_t mxfp4_scale_code(float amax, MxRounding rounding) {
  return e8m0_scale_code(amax, kE2m1Emax, kE2m1Max, rounding);
}

}  // namespace mixp::kernels
