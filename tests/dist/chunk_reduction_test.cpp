// The local step of the 16-bit reductions against a scalar reference, and the control that
// shows why mixp never adds a chain of bf16 values.
#include "dist/chunk_reduction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "dist/reduction_data.h"
#include "mixp/ops.h"
#include "mixp/tensor.h"

namespace mixp::dist {
namespace {

template <typename T>
std::vector<T> chunks_of(int ranks, size_t count, bool with_negatives) {
  std::vector<T> all(size_t(ranks) * count);
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const float v = float(test::contribution(r, i));
      all[size_t(r) * count + i] = T(with_negatives && (i + size_t(r)) % 3 == 0 ? -v : v);
    }
  }
  return all;
}

// Element by element, in the order the function promises: rank order, fp32, one rounding.
template <typename T>
T reference(const std::vector<T>& all, int ranks, size_t count, size_t i, ReduceOp op) {
  float acc = float(all[i]);
  for (int r = 1; r < ranks; ++r) {
    const float x = float(all[size_t(r) * count + i]);
    acc = op == ReduceOp::sum ? acc + x : std::fmax(acc, x);
  }
  return T(acc);
}

template <typename T>
void expect_matches_reference(DType dtype) {
  for (int ranks : {1, 2, 3, 8}) {
    for (size_t count : {size_t(1), size_t(7), size_t(1003)}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        const std::vector<T> all = chunks_of<T>(ranks, count, true);
        std::vector<T> out(count);
        reduce_chunks_in_rank_order({all.data(), all.size(), dtype}, ranks,
                                    {out.data(), out.size(), dtype}, op);
        for (size_t i = 0; i < count; ++i) {
          const T want = reference(all, ranks, count, i, op);
          ASSERT_EQ(out[i].bits, want.bits)
              << name_of(dtype) << " " << name_of(op) << ", " << ranks << " ranks, element " << i
              << " of " << count << ": got " << float(out[i]) << ", want " << float(want);
        }
      }
    }
  }
}

TEST(ReduceChunksInRankOrder, SumsInRankOrderAndRoundsOnce) {
  expect_matches_reference<bfloat16>(DType::bf16);
  expect_matches_reference<float16>(DType::f16);
}

TEST(ReduceChunksInRankOrder, MaxKeepsANanFromAnyRank) {
  std::vector<bfloat16> all{bfloat16(1.0f), bfloat16(NAN), bfloat16(3.0f), bfloat16(2.0f)};
  std::vector<bfloat16> out(2);
  reduce_chunks_in_rank_order({all.data(), 4, DType::bf16}, 2, {out.data(), 2, DType::bf16},
                              ReduceOp::max);
  EXPECT_EQ(float(out[0]), 3.0f);
  EXPECT_TRUE(std::isnan(float(out[1])));
}

// ordered_sum is what a process gets by adding the ranks' tensors one after another with mixp's
// own add (as gradient accumulation does), bit for bit, in every dtype it takes.
TEST(ReduceChunksInRankOrder, OrderedSumIsAChainOfTensorAdditions) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (int ranks : {1, 2, 3, 8}) {
      const int64_t count = 1003;
      std::vector<Tensor> parts;
      for (int r = 0; r < ranks; ++r) {
        std::vector<double> values(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) {
          const double v = double(test::contribution_f32(r, size_t(i)));
          values[size_t(i)] = (i + r) % 3 == 0 ? -v : v;
        }
        parts.push_back(from_values(values, {count}, dtype));
      }
      Tensor chained = parts[0].clone();
      for (int r = 1; r < ranks; ++r) chained = ops::add(chained, parts[size_t(r)]);
      const Tensor all = ops::cat(parts, 0);
      Tensor out = empty({count}, dtype);
      reduce_chunks_in_rank_order({all.raw_data(), size_t(all.numel()), dtype}, ranks,
                                  {out.raw_data(), size_t(count), dtype}, ReduceOp::ordered_sum);
      const size_t bytes = size_t(count) * size_t(size_of(dtype));
      EXPECT_EQ(std::memcmp(out.raw_data(), chained.raw_data(), bytes), 0)
          << name_of(dtype) << ", " << ranks << " ranks";
    }
  }
}

// A rank's chunk of a buffer smaller than the ranks is empty, with null pointers (an empty
// std::vector's): every dtype and operation does nothing, and touches no memory (the sanitizers'
// build checks the pointers are never passed on).
TEST(ReduceChunksInRankOrder, AnEmptyChunkIsReducedToNothing) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const std::vector<ReduceOp> ops = dtype == DType::f32 || dtype == DType::f64
                                          ? std::vector<ReduceOp>{ReduceOp::ordered_sum}
                                          : std::vector<ReduceOp>{ReduceOp::sum, ReduceOp::max,
                                                                  ReduceOp::ordered_sum};
    for (ReduceOp op : ops) {
      EXPECT_NO_THROW(reduce_chunks_in_rank_order({nullptr, 0, dtype}, 4, {nullptr, 0, dtype}, op))
          << name_of(dtype) << " " << name_of(op);
    }
  }
}

// The error of the rejected bf16 ring grows with the ranks, while one rounding of the fp32 sum
// stays within one bf16 rounding of the exact sum at every rank count.
TEST(Bf16Reduction, ANaiveRingDriftsWithTheRanksOneRoundingDoesNot) {
  const size_t count = 4096;
  std::vector<double> naive_mean;
  for (int ranks : {2, 4, 8}) {
    const auto all = test::contributions(ranks, count);
    std::vector<bfloat16> naive(count), once(count);
    std::vector<double> exact(count);
    for (size_t i = 0; i < count; ++i) {
      exact[i] = test::exact_sum(all, i);
      naive[i] = test::naive_bf16_ring_sum(all, i);
      once[i] = test::fp32_sum_rounded_once(all, i);
      ASSERT_LE(std::fabs(double(float(once[i])) - exact[i]),
                test::one_bf16_rounding(exact[i], ranks))
          << ranks << " ranks, element " << i;
    }
    const auto naive_error = test::relative_error(naive, exact);
    const auto once_error = test::relative_error(once, exact);
    std::printf(
        "%d ranks: bf16 ring mean %.3g max %.3g; fp32 sum rounded once mean %.3g max %.3g\n", ranks,
        naive_error.mean, naive_error.max, once_error.mean, once_error.max);
    naive_mean.push_back(naive_error.mean);
    EXPECT_GE(naive_error.mean, once_error.mean) << ranks << " ranks";
  }
  EXPECT_LT(naive_mean[0], naive_mean[1]);
  EXPECT_LT(naive_mean[1], naive_mean[2]);
}

}  // namespace
}  // namespace mixp::dist
