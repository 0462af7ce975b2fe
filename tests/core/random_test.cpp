#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "mixp/random.h"

namespace mixp {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors), as
// published with Salmon et al., SC'11.
TEST(Philox, KnownAnswerVectors) {
  using W4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (W4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (W4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (W4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, WordsAreTheBlocksLaidOutInOrder) {
  const PhiloxState s{0x1234567890abcdefull, 0xfeedull, 0};
  for (uint64_t block = 0; block < 5; ++block) {
    const auto words = philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0xfeed, 0},
                                     {0x90abcdef, 0x12345678});
    for (uint64_t w = 0; w < 4; ++w) EXPECT_EQ(philox_word(s, block * 4 + w), words[w]);
  }
}

TEST(Philox, BulkWordsMatchSingleWordsAtAnyOffset) {
  for (uint64_t offset : {0ull, 1ull, 3ull, 4ull, 1001ull, (1ull << 40) + 2}) {
    const PhiloxState s{42, 7, offset};
    std::vector<uint32_t> bulk(37);
    philox_words(s, 5, bulk.data(), bulk.size());
    for (size_t i = 0; i < bulk.size(); ++i) ASSERT_EQ(bulk[i], philox_word(s, 5 + i)) << offset;
  }
}

TEST(Philox, SequentialGeneratorFollowsTheOffset) {
  Philox gen(PhiloxState{5, 1, 10});
  const PhiloxState start = gen.state();
  for (uint64_t i = 0; i < 9; ++i) EXPECT_EQ(gen.next_u32(), philox_word(start, i));
  EXPECT_EQ(gen.state().offset, 19u);
}

TEST(Philox, StreamsAndSeedsDiffer) {
  std::set<uint32_t> seen;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    for (uint64_t stream = 0; stream < 4; ++stream) {
      seen.insert(philox_word(PhiloxState{seed, stream, 0}, 0));
    }
  }
  EXPECT_EQ(seen.size(), 16u);
}

TEST(Philox, UniformAndNormalAreInRangeWithTheRightMoments) {
  Philox gen(PhiloxState{9, 9, 0});
  const int n = 100000;
  double sum = 0, sum_sq = 0, normal_sum = 0, normal_sq = 0;
  for (int i = 0; i < n; ++i) {
    const float u = gen.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += double(u) * u;
    const float z = gen.normal();
    ASSERT_TRUE(std::isfinite(z));
    normal_sum += z;
    normal_sq += double(z) * z;
  }
  // Means within 5 standard errors: uniform sd 1/sqrt(12), normal sd 1.
  EXPECT_NEAR(sum / n, 0.5, 5.0 / std::sqrt(12.0 * n));
  EXPECT_NEAR(normal_sum / n, 0.0, 5.0 / std::sqrt(double(n)));
  // Variance of a normal sample: sd of the estimate is about sqrt(2 / n).
  EXPECT_NEAR(normal_sq / n, 1.0, 5.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12.0, 5.0 * std::sqrt(1.0 / (180.0 * n)));
}

}  // namespace
}  // namespace mixp
