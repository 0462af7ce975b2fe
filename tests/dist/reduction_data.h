// What each rank contributes to the reductions of the dist tests, computable on every rank, and
// the fp64 and error measures that the tests hold the reductions to.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "mixp/float_types.h"
#include "mixp/random.h"

namespace mixp::test {

/// Rank `rank`'s element i: positive, in [0.125, 4) over five binades, exact in bf16. Positive,
/// as gradient sums of one sign are where a chain of roundings drifts most.
inline bfloat16 contribution(int rank, size_t i) {
  Philox rng(PhiloxState{2026, uint64_t(rank), uint64_t(i)});
  const float unit = 0.5f + 0.5f * rng.uniform();
  return bfloat16(std::ldexp(unit, int(i % 5) - 2));
}

/// Rank `rank`'s element i for the f32 reduction: as contribution(), with all 24 bits of fp32.
inline float contribution_f32(int rank, size_t i) {
  Philox rng(PhiloxState{2027, uint64_t(rank), uint64_t(i)});
  return std::ldexp(0.5f + 0.5f * rng.uniform(), int(i % 5) - 2);
}

/// Every rank's contributions, rank 0's first: ranks x count.
inline std::vector<std::vector<bfloat16>> contributions(int ranks, size_t count) {
  std::vector<std::vector<bfloat16>> all(static_cast<size_t>(ranks), std::vector<bfloat16>(count));
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i < count; ++i) all[size_t(r)][i] = contribution(r, i);
  }
  return all;
}

/// The exact sum of element i over the ranks: bf16 values of five binades add exactly in fp64.
inline double exact_sum(const std::vector<std::vector<bfloat16>>& all, size_t i) {
  double sum = 0;
  for (const auto& rank : all) sum += double(float(rank[i]));
  return sum;
}

/// Element i summed in fp32 in rank order and rounded once to bf16: what the 16-bit all-reduce
/// promises, computed here without any of its code.
inline bfloat16 fp32_sum_rounded_once(const std::vector<std::vector<bfloat16>>& all, size_t i) {
  float sum = float(all[0][i]);
  for (size_t r = 1; r < all.size(); ++r) sum += float(all[r][i]);
  return bfloat16(sum);
}

/// The control that mixp does not offer: a ring in bf16, rounding the partial sum at every hop.
inline bfloat16 naive_bf16_ring_sum(const std::vector<std::vector<bfloat16>>& all, size_t i) {
  bfloat16 partial = all[0][i];
  for (size_t r = 1; r < all.size(); ++r) partial = bfloat16(float(partial) + float(all[r][i]));
  return partial;
}

/// How far one rounding of a sum of `ranks` terms to bf16 may land from the exact sum: half a
/// bf16 unit in the last place (8 significant bits) at the sum's magnitude, plus fp32's own
/// error over the ranks' additions, (ranks - 1) 2^-24 times the sum of magnitudes (all positive).
inline double one_bf16_rounding(double exact, int ranks) {
  const double accumulation = double(ranks - 1) * 0x1p-24 * std::fabs(exact);
  const double magnitude = std::fabs(exact) + accumulation;
  return std::ldexp(1.0, std::ilogb(magnitude) - 8) + accumulation;
}

/// Mean and largest |got - exact| / |exact| over the elements.
struct RelativeError {
  double mean = 0, max = 0;
};

template <typename Got>
RelativeError relative_error(const std::vector<Got>& got, const std::vector<double>& exact) {
  RelativeError e;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(double(float(got[i])) - exact[i]) / std::fabs(exact[i]);
    e.mean += error / double(got.size());
    e.max = std::max(e.max, error);
  }
  return e;
}

}  // namespace mixp::test
