// The scalar versions of kernels/vmath.h: the bits every ISA's kernel gives. Each step is one
// correctly rounded fp32 operation (std::fma, std::nearbyint, std::ldexp), as in the vector
// kernels.
#include <cmath>

#include "kernels/vmath_isa.h"
#include "mixp/float_types.h"

namespace mixp::kernels::ref {
namespace {

using namespace vmath;

float exp1(float x) {
  // The clamp keeps NaN: std::fmin/fmax would replace it.
  if (!(x <= kExpMax)) x = std::isnan(x) ? x : kExpMax;
  if (!(x >= kExpMin)) x = std::isnan(x) ? x : kExpMin;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpPoly[0];
  for (int k = 1; k < 6; ++k) p = std::fma(p, r, kExpPoly[k]);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  return std::isnan(n) ? n : std::ldexp(p, int(n));
}

// sigmoid(2u) of gelu_tanh, with x^2 and e = e^(-2u) (1 - s = e s without cancellation).
float gelu_sigmoid(float x, float& x2, float& e) {
  x2 = x * x;
  const float u = kGeluK * std::fma(kGeluA * x2, x, x);
  e = exp1(-2.0f * u);
  return 1.0f / (1.0f + e);
}

// The lanes of sum_f32 and dot_f32 folded into one: l + 8, l + 4, l + 2, l + 1.
float fold_lanes(float (&lane)[kLanes]) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

}  // namespace

float sum_f32(const float* x, int64_t n) {
  float lane[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % kLanes] += x[i];
  return fold_lanes(lane);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float lane[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float product = a[i] * b[i];
    lane[i % kLanes] += product;
  }
  return fold_lanes(lane);
}

float max_f32(const float* x, int64_t n) {
  // The maximum does not depend on the order, except which zero wins when +0 and -0 tie:
  // `x > m ? x : m` keeps the one already held, in a lane and in the folding, as the vector
  // kernel does.
  float lane[kLanes];
  for (float& m : lane) m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    float& m = lane[i % kLanes];
    m = x[i] > m ? x[i] : m;
  }
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] = lane[l + width] > lane[l] ? lane[l + width] : lane[l];
  }
  return lane[0];
}

void accumulate_bf16(const uint16_t* x, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += float(bfloat16::from_bits(x[i]));
}

void accumulate_f16(const uint16_t* x, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += float(float16::from_bits(x[i]));
}

void accumulate_f32(const float* x, float* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

void exp_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp1(x[i]);
}

void scale_shift_exp_f32(const float* x, float* y, int64_t n, float scale, float shift) {
  for (int64_t i = 0; i < n; ++i) {
    const float scaled = x[i] * scale;
    y[i] = exp1(scaled - shift);
  }
}

float scale_shift_exp_sum_f32(const float* x, float* y, int64_t n, float scale, float shift) {
  scale_shift_exp_f32(x, y, n, scale, shift);
  return sum_f32(y, n);
}

void divide_f32(float* x, int64_t n, float d) {
  for (int64_t i = 0; i < n; ++i) x[i] /= d;
}

void score_grad_f32(const float* p, float* dp, int64_t n, float dot, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float weighted = p[i] * (dp[i] - dot);
    dp[i] = weighted * scale;
  }
}

void gelu_tanh_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float x2, e;
    const float s = gelu_sigmoid(x[i], x2, e);
    y[i] = x[i] * s;
  }
}

void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    float x2, e;
    const float s = gelu_sigmoid(v, x2, e);
    const float du = kGeluK * std::fma(kGeluA3, x2, 1.0f);
    // e * s is inf * 0 once e^(-2u) overflows, where 1 - s is 1: vminps(e s, 1) semantics.
    const float es = e * s, one_minus_s = es < 1.0f ? es : 1.0f;
    const float d = s * std::fma(2.0f * v * one_minus_s, du, 1.0f);
    dx[i] = g[i] * d;
  }
}

// On bf16 bits: widened, the fp32 kernels above, rounded once.
void relu_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = float(bfloat16::from_bits(x[i]));
    y[i] = bfloat16(v > 0.0f ? v : 0.0f).bits;
  }
}

void relu_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float grad = float(bfloat16::from_bits(g[i])), v = float(bfloat16::from_bits(x[i]));
    dx[i] = bfloat16(v > 0.0f ? grad : 0.0f).bits;
  }
}

void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = float(bfloat16::from_bits(x[i]));
    float out = 0;
    gelu_tanh_f32(&v, &out, 1);
    y[i] = bfloat16(out).bits;
  }
}

void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float grad = float(bfloat16::from_bits(g[i])), v = float(bfloat16::from_bits(x[i]));
    float out = 0;
    gelu_tanh_backward_f32(&grad, &v, &out, 1);
    dx[i] = bfloat16(out).bits;
  }
}

}  // namespace mixp::kernels::ref
