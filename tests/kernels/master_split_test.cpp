// The fp32 master of a bf16 parameter kept as the parameter, its low 16 bits and a tie bit
// (kernels/master_split.h): every top half with the low halves that matter comes back exactly,
// the parameter is the master rounded to nearest even, and every ISA gives the scalar bits.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "kernels/master_split.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"

namespace mixp {
namespace {

struct Split {
  std::vector<uint16_t> param, low;
  std::vector<uint8_t> ties;
};

Split split(const std::vector<float>& master) {
  const int64_t n = int64_t(master.size());
  Split s{std::vector<uint16_t>(master.size()), std::vector<uint16_t>(master.size()),
          std::vector<uint8_t>(size_t((n + 7) / 8), 0xa5)};  // stale bits must be overwritten
  // The AVX-512 kernel where the active ISA has it (the optimizers' candidates call both by name).
  const auto kernel = active_isa() >= Isa::avx512 ? kernels::avx512::split_master_bf16
                                                  : kernels::ref::split_master_bf16;
  kernel(master.data(), n, s.param.data(), s.low.data(), s.ties.data());
  return s;
}

std::vector<float> join(const Split& s) {
  std::vector<float> master(s.param.size());
  const auto kernel = active_isa() >= Isa::avx512 ? kernels::avx512::join_master_bf16
                                                  : kernels::ref::join_master_bf16;
  kernel(s.param.data(), s.low.data(), s.ties.data(), int64_t(master.size()), master.data());
  return master;
}

bool is_nan_bits(uint32_t x) { return (x & 0x7fffffffu) > 0x7f800000u; }

// Every top half (every bf16 pattern) with the low halves on both sides of the tie, and more.
std::vector<float> every_top_half() {
  std::vector<float> m;
  for (uint32_t top = 0; top < 0x10000u; ++top) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x1234u}) {
      m.push_back(std::bit_cast<float>((top << 16) | low));
    }
  }
  return m;
}

TEST(MasterSplit, EveryMasterComesBackExactlyAndNaNsComeBackQuiet) {
  const std::vector<float> master = every_top_half();
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    const Split s = split(master);
    const std::vector<float> back = join(s);
    int64_t ties_rounded_up = 0;
    for (size_t i = 0; i < master.size(); ++i) {
      const uint32_t m = std::bit_cast<uint32_t>(master[i]), b = std::bit_cast<uint32_t>(back[i]);
      ASSERT_EQ(s.param[i], bfloat16(master[i]).bits) << name_of(isa) << " " << std::hex << m;
      ASSERT_EQ(s.low[i], m & 0xffffu) << name_of(isa) << " " << std::hex << m;
      ASSERT_EQ(b, is_nan_bits(m) ? m | 0x00400000u : m) << name_of(isa) << " " << std::hex << m;
      ties_rounded_up += (s.ties[i / 8] >> (i % 8)) & 1;
    }
    // Half the finite top halves are odd, and their ties round up; NaNs never count.
    EXPECT_GT(ties_rounded_up, 30000) << name_of(isa);
  }
}

TEST(MasterSplit, EveryIsaGivesTheScalarBitsAtAwkwardLengths) {
  Philox rng(PhiloxState{5, 1, 0});
  for (const int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 1037}) {
    std::vector<float> master(static_cast<size_t>(n));
    for (float& m : master) {
      const uint32_t word = rng.next_u32();
      // A quarter of the elements are ties, the rest spread over every exponent.
      m = std::bit_cast<float>(word % 4 == 0 ? (word & 0xffff0000u) | 0x8000u : word);
    }
    Split want;
    {
      IsaLimit scalar(Isa::scalar);
      want = split(master);
    }
    for (Isa isa : kAllIsas) {
      if (isa > best_isa()) continue;
      IsaLimit limit(isa);
      const Split got = split(master);
      EXPECT_EQ(got.param, want.param) << name_of(isa) << " n " << n;
      EXPECT_EQ(got.low, want.low) << name_of(isa) << " n " << n;
      EXPECT_EQ(got.ties, want.ties) << name_of(isa) << " n " << n;
      // The bits past n in the last byte are zero.
      if (n % 8) {
        EXPECT_EQ(got.ties.back() >> (n % 8), 0) << name_of(isa) << " n " << n;
      }
      const std::vector<float> back = join(got);
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t m = std::bit_cast<uint32_t>(master[size_t(i)]);
        ASSERT_EQ(std::bit_cast<uint32_t>(back[size_t(i)]), is_nan_bits(m) ? m | 0x00400000u : m)
            << name_of(isa) << " n " << n << " element " << i;
      }
    }
  }
}

TEST(MasterSplit, ATieIsTheOnlyCaseThatNeedsItsBit) {
  // 1 + 2^-8 (top half odd) and 1 (even), each with low half 0x8000: both parameters are even,
  // and only the tie bit tells which top half the master had.
  const std::vector<float> master = {std::bit_cast<float>(0x3f818000u),
                                     std::bit_cast<float>(0x3f808000u)};
  const Split s = split(master);
  EXPECT_EQ(s.param[0], 0x3f82);  // rounded up
  EXPECT_EQ(s.param[1], 0x3f80);  // kept
  EXPECT_EQ(s.ties[0], 0x01);
  Split flipped = s;
  flipped.ties[0] = 0x00;
  EXPECT_NE(std::bit_cast<uint32_t>(join(flipped)[0]), 0x3f818000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(join(s)[0]), 0x3f818000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(join(s)[1]), 0x3f808000u);
}

}  // namespace
}  // namespace mixp
