// mixp/convert.h — bulk conversion of buffers between fp32 and the low-precision formats.
//
// Each function converts `src` into `dst`, which must have the same number of elements and must
// not overlap it. The rounding is that of mixp/float_types.h (nearest even, subnormals kept,
// NaN kept), on every ISA path: the vector kernels give the same bits as the scalar ones.
//
// The FP8 conversions take a scale, as the FP8 training recipes need: encoding computes
// q = fp8(fp32(x * scale)), one fp32 multiply then one rounding to FP8; decoding computes
// x = fp32(q) * scale_inv. A scale of 1 is plain conversion.
//
// Example:
//
//   std::vector<float> x(n);
//   std::vector<mixp::bfloat16> b(n);
//   mixp::convert(x, b);                         // fp32 -> bf16
//   std::vector<mixp::float8_e4m3> q(n);
//   float amax = 3.2f, scale = 448.0f / amax;
//   mixp::convert(x, q, scale, mixp::Overflow::saturate);
//   mixp::convert(q, x, 1.0f / scale);           // and back, approximately
//   mixp::convert_stochastic(x, b, mixp::PhiloxState{seed, stream, offset});
#pragma once

#include <span>

#include "mixp/float_types.h"
#include "mixp/random.h"

namespace mixp {

void convert(std::span<const float> src, std::span<float16> dst);
void convert(std::span<const float> src, std::span<bfloat16> dst);
void convert(std::span<const float16> src, std::span<float> dst);
void convert(std::span<const bfloat16> src, std::span<float> dst);
void convert(std::span<const float> src, std::span<float8_e4m3> dst, float scale,
             Overflow overflow);
void convert(std::span<const float> src, std::span<float8_e5m2> dst, float scale,
             Overflow overflow);
void convert(std::span<const float8_e4m3> src, std::span<float> dst, float scale_inv);
void convert(std::span<const float8_e5m2> src, std::span<float> dst, float scale_inv);

/// fp32 -> bf16 with stochastic rounding. Element i uses word `rng.offset + i` of the Philox
/// stream (rng.seed, rng.stream); the caller advances rng.offset by src.size() afterwards.
void convert_stochastic(std::span<const float> src, std::span<bfloat16> dst,
                        const PhiloxState& rng);

}  // namespace mixp
