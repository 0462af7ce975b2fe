// Bulk stochastic rounding (kernels/stochastic_rounding.h): the vectorized Philox gives the
// words of the scalar one at any offset, and the rounding gives bfloat16::round_stochastic's
// bits on every ISA, from either half of a word.
#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <vector>

#include "kernels/stochastic_rounding.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"

namespace mixp {
namespace {

TEST(StochasticRounding, PhiloxWordsAreTheScalarWordsAtEveryOffset) {
  // Seeds and streams with both halves set; offsets not on a block, and a block counter that
  // carries from its low into its high 32 bits within one step of 16 blocks.
  const std::vector<PhiloxState> states = {
      {1, 0, 0}, {0x123456789abcdefull, 0xfedcba9876543210ull, 3}, {7, 2, 4 * 0xfffffff8ull + 1}};
  for (const PhiloxState& state : states) {
    for (const uint64_t first : {0, 1, 5}) {
      for (const uint64_t count : {0, 1, 3, 63, 64, 65, 130, 1000}) {
        std::vector<uint32_t> want(count), got(count, 0);
        philox_words(state, first, want.data(), count);
        for (Isa isa : kAllIsas) {
          if (isa > best_isa()) continue;
          IsaLimit limit(isa);
          kernels::philox_words(state, first, got.data(), count);
          ASSERT_EQ(got, want) << name_of(isa) << " offset " << state.offset << " first " << first
                               << " count " << count;
        }
      }
    }
  }
}

std::vector<float> values_to_round() {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          1.0f + 0x1p-9f,
                          -3.14159f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          1e-40f,
                          std::bit_cast<float>(0x7f800001u),   // signalling NaN
                          std::bit_cast<float>(0xffc01234u)};  // quiet negative NaN
  for (uint32_t i = 0; i < 1000; ++i) x.push_back(std::bit_cast<float>(i * 0x9e3779b9u));
  return x;
}

TEST(StochasticRounding, EveryIsaRoundsAsBfloat16RoundStochastic) {
  const std::vector<float> x = values_to_round();
  std::vector<uint32_t> words(x.size());
  philox_words(PhiloxState{9, 4, 0}, 0, words.data(), words.size());
  for (const unsigned shift : {0u, 16u}) {
    std::vector<uint16_t> want(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      want[i] = bfloat16::round_stochastic(x[i], words[i] >> shift).bits;
    for (Isa isa : kAllIsas) {
      if (isa > best_isa()) continue;
      IsaLimit limit(isa);
      for (const size_t n : {x.size(), size_t(17), size_t(3)}) {
        std::vector<uint16_t> got(n);
        kernels::round_bf16_stochastic(x.data(), words.data(), shift, int64_t(n), got.data());
        ASSERT_EQ(got, std::vector<uint16_t>(want.begin(), want.begin() + std::ptrdiff_t(n)))
            << name_of(isa) << " shift " << shift << " n " << n;
      }
    }
  }
}

TEST(StochasticRounding, TheTwoHalvesOfAWordRoundIndependently) {
  // 1 + 2^-8 lies halfway between two bf16 values: the low half 0x8000 rounds it up, 0x7fff
  // down, so one word rounds the first value up and the second down.
  const float x[2] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f};
  const uint32_t words[2] = {0x7fff8000u, 0x7fff8000u};
  uint16_t low_half[2], high_half[2];
  kernels::round_bf16_stochastic(x, words, 0, 2, low_half);
  kernels::round_bf16_stochastic(x, words, 16, 2, high_half);
  EXPECT_EQ(low_half[0], 0x3f81);
  EXPECT_EQ(high_half[0], 0x3f80);
}

}  // namespace
}  // namespace mixp
