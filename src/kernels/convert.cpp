// mixp::convert: checks the arguments, then runs the registry's conversion kernel.
#include "mixp/convert.h"

#include <algorithm>
#include <cmath>

#include "kernels/convert.h"
#include "kernels/stochastic_rounding.h"
#include "mixp/error.h"

namespace mixp {
namespace {

template <typename Src, typename Dst>
void check_sizes(const char* op, std::span<Src> src, std::span<Dst> dst) {
  MIXP_CHECK(src.size() == dst.size(), op, ": source has ", src.size(),
             " elements but destination has ", dst.size());
  const auto* s = reinterpret_cast<const unsigned char*>(src.data());
  const auto* d = reinterpret_cast<const unsigned char*>(dst.data());
  const bool disjoint = s + src.size_bytes() <= d || d + dst.size_bytes() <= s;
  MIXP_CHECK(src.empty() || disjoint, op, ": source and destination overlap");
}

void check_scale(const char* op, const char* what, float scale) {
  MIXP_CHECK(std::isfinite(scale) && scale > 0.0f, op, ": the ", what,
             " must be finite and positive, got ", scale);
}

uint16_t* bits(std::span<float16> s) { return reinterpret_cast<uint16_t*>(s.data()); }
uint16_t* bits(std::span<bfloat16> s) { return reinterpret_cast<uint16_t*>(s.data()); }
uint8_t* bits(std::span<float8_e4m3> s) { return reinterpret_cast<uint8_t*>(s.data()); }
uint8_t* bits(std::span<float8_e5m2> s) { return reinterpret_cast<uint8_t*>(s.data()); }
const uint16_t* bits(std::span<const float16> s) {
  return reinterpret_cast<const uint16_t*>(s.data());
}
const uint16_t* bits(std::span<const bfloat16> s) {
  return reinterpret_cast<const uint16_t*>(s.data());
}
const uint8_t* bits(std::span<const float8_e4m3> s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}
const uint8_t* bits(std::span<const float8_e5m2> s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

using namespace kernels;

}  // namespace

void convert(std::span<const float> src, std::span<float16> dst) {
  check_sizes("convert f32->f16", src, dst);
  f32_to_f16(src.data(), bits(dst), src.size());
}

void convert(std::span<const float> src, std::span<bfloat16> dst) {
  check_sizes("convert f32->bf16", src, dst);
  f32_to_bf16(src.data(), bits(dst), src.size());
}

void convert(std::span<const float16> src, std::span<float> dst) {
  check_sizes("convert f16->f32", src, dst);
  f16_to_f32(bits(src), dst.data(), src.size());
}

void convert(std::span<const bfloat16> src, std::span<float> dst) {
  check_sizes("convert bf16->f32", src, dst);
  bf16_to_f32(bits(src), dst.data(), src.size());
}

void convert(std::span<const float> src, std::span<float8_e4m3> dst, float scale,
             Overflow overflow) {
  check_sizes("convert f32->e4m3", src, dst);
  check_scale("convert f32->e4m3", "scale", scale);
  f32_to_e4m3(src.data(), bits(dst), src.size(), scale, overflow);
}

void convert(std::span<const float> src, std::span<float8_e5m2> dst, float scale,
             Overflow overflow) {
  check_sizes("convert f32->e5m2", src, dst);
  check_scale("convert f32->e5m2", "scale", scale);
  f32_to_e5m2(src.data(), bits(dst), src.size(), scale, overflow);
}

void convert(std::span<const float8_e4m3> src, std::span<float> dst, float scale_inv) {
  check_sizes("convert e4m3->f32", src, dst);
  check_scale("convert e4m3->f32", "inverse scale", scale_inv);
  e4m3_to_f32(bits(src), dst.data(), src.size(), scale_inv);
}

void convert(std::span<const float8_e5m2> src, std::span<float> dst, float scale_inv) {
  check_sizes("convert e5m2->f32", src, dst);
  check_scale("convert e5m2->f32", "inverse scale", scale_inv);
  e5m2_to_f32(bits(src), dst.data(), src.size(), scale_inv);
}

void convert_stochastic(std::span<const float> src, std::span<bfloat16> dst,
                        const PhiloxState& rng) {
  check_sizes("convert_stochastic f32->bf16", src, dst);
  constexpr size_t kChunk = 1024;
  uint32_t random[kChunk];
  for (size_t start = 0; start < src.size(); start += kChunk) {
    const size_t count = std::min(kChunk, src.size() - start);
    kernels::philox_words(rng, start, random, count);
    kernels::round_bf16_stochastic(src.data() + start, random, 0, int64_t(count),
                                   bits(dst.subspan(start, count)));
  }
}

}  // namespace mixp
