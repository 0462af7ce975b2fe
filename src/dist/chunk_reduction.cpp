#include "dist/chunk_reduction.h"

#include <cmath>
#include <cstring>
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

const unsigned char* chunk_of(ConstBuffer contributions, int rank, size_t count) {
  return static_cast<const unsigned char*>(contributions.data) +
         size_t(rank) * count * size_t(size_of(contributions.dtype));
}

// 16-bit values accumulated in fp32, rounded once at the end or (round_each) after every addition.
void reduce_sixteen_bit(ConstBuffer contributions, int ranks, Buffer out, ReduceOp op,
                        bool round_each) {
  const size_t count = out.count;
  std::vector<float> accumulator(count), next(count);
  widen({chunk_of(contributions, 0, count), count, out.dtype}, accumulator);
  for (int r = 1; r < ranks; ++r) {
    widen({chunk_of(contributions, r, count), count, out.dtype}, next);
    if (op == ReduceOp::max) {
      for (size_t j = 0; j < count; ++j) accumulator[j] = maximum(accumulator[j], next[j]);
      continue;
    }
    for (size_t j = 0; j < count; ++j) accumulator[j] += next[j];
    if (round_each) {
      narrow(accumulator, out);
      widen({out.data, count, out.dtype}, accumulator);
    }
  }
  narrow(accumulator, out);
}

template <typename T>
void ordered_sum(ConstBuffer contributions, int ranks, Buffer out) {
  const size_t count = out.count;
  std::vector<T> accumulator(count), next(count);
  std::memcpy(accumulator.data(), chunk_of(contributions, 0, count), count * sizeof(T));
  for (int r = 1; r < ranks; ++r) {
    std::memcpy(next.data(), chunk_of(contributions, r, count), count * sizeof(T));
    for (size_t j = 0; j < count; ++j) accumulator[j] += next[j];
  }
  std::memcpy(out.data, accumulator.data(), count * sizeof(T));
}

}  // namespace

bool reduced_in_rank_order(DType dtype, ReduceOp op) {
  if (dtype == DType::bf16 || dtype == DType::f16) return true;
  return op == ReduceOp::ordered_sum && (dtype == DType::f32 || dtype == DType::f64);
}

void reduce_chunks_in_rank_order(ConstBuffer contributions, int ranks, Buffer out, ReduceOp op) {
  MIXP_ASSERT(reduced_in_rank_order(out.dtype, op));
  MIXP_ASSERT(contributions.dtype == out.dtype && ranks > 0 &&
              contributions.count == out.count * size_t(ranks));
  // A rank's chunk of a small buffer can be empty, and its pointers null: nothing to add.
  if (out.count == 0) return;
  switch (out.dtype) {
    case DType::f32: return ordered_sum<float>(contributions, ranks, out);
    case DType::f64: return ordered_sum<double>(contributions, ranks, out);
    default: return reduce_sixteen_bit(contributions, ranks, out, op, op == ReduceOp::ordered_sum);
  }
}

}  // namespace mixp::dist
