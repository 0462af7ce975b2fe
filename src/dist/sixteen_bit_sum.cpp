#include "dist/sixteen_bit_sum.h"

#include <cmath>
#include <vector>

#include "mixp/convert.h"
#include "mixp/error.h"

namespace mixp::dist {
namespace {

void widen(ConstBuffer chunk, std::span<float> out) {
  if (chunk.dtype == DType::bf16) {
    convert(std::span(static_cast<const bfloat16*>(chunk.data), chunk.count), out);
  } else {
    convert(std::span(static_cast<const float16*>(chunk.data), chunk.count), out);
  }
}

void narrow(std::span<const float> in, Buffer out) {
  if (out.dtype == DType::bf16) {
    convert(in, std::span(static_cast<bfloat16*>(out.data), out.count));
  } else {
    convert(in, std::span(static_cast<float16*>(out.data), out.count));
  }
}

// A NaN on any rank makes the maximum NaN, as the sum would be.
float maximum(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return a < b ? b : a;
}

}  // namespace

void reduce_chunks_in_fp32(ConstBuffer contributions, int ranks, Buffer out, ReduceOp op) {
  MIXP_ASSERT(out.dtype == DType::bf16 || out.dtype == DType::f16);
  MIXP_ASSERT(contributions.dtype == out.dtype && ranks > 0 &&
              contributions.count == out.count * size_t(ranks));
  const size_t count = out.count;
  const size_t element_bytes = size_t(size_of(out.dtype));
  const auto* bytes = static_cast<const unsigned char*>(contributions.data);
  std::vector<float> accumulator(count), next(count);
  widen({bytes, count, out.dtype}, accumulator);
  for (int r = 1; r < ranks; ++r) {
    widen({bytes + size_t(r) * count * element_bytes, count, out.dtype}, next);
    if (op == ReduceOp::sum) {
      for (size_t j = 0; j < count; ++j) accumulator[j] += next[j];
    } else {
      for (size_t j = 0; j < count; ++j) accumulator[j] = maximum(accumulator[j], next[j]);
    }
  }
  narrow(accumulator, out);
}

}  // namespace mixp::dist
