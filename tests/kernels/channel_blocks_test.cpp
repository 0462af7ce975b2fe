// kernels/channel_blocks.h: every candidate writes each value where the layouts' index
// formulas put it, both ways, for any thread count; ops_test's bf16 convolution tests hold the
// layout to oneDNN's, whose bf16 convolutions read and write it through these kernels.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/channel_blocks.h"
#include "mixp/cpu.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

struct Image {
  int64_t n, c, hw;
  int64_t size() const { return n * c * hw; }
};

// Distinct values, so that a value in the wrong place shows.
std::vector<uint16_t> numbered(int64_t size) {
  std::vector<uint16_t> v(static_cast<size_t>(size));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint16_t(i * 7919u + 1u);
  return v;
}

// The blocked index of (image i, channel k, pixel p): [n, c / 16, hw, 16].
int64_t blocked_index(const Image& s, int64_t i, int64_t k, int64_t p) {
  return ((i * (s.c / 16) + k / 16) * s.hw + p) * 16 + k % 16;
}

void expect_blocked(const Image& s, const std::vector<uint16_t>& nchw,
                    const std::vector<uint16_t>& blocked, const std::string& what) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t k = 0; k < s.c; ++k)
      for (int64_t p = 0; p < s.hw; ++p)
        wrong +=
            nchw[size_t((i * s.c + k) * s.hw + p)] != blocked[size_t(blocked_index(s, i, k, p))];
  EXPECT_EQ(wrong, 0) << what;
}

// Pixel counts around the 16 of a transposed block and the 32 of a line read (1, 15, 16, 17,
// 32, 33, 48, 64, 81, the cnn's 196 and 784),
// one to three channel blocks, one and three images; both directions; 1, 2 and 3 threads and
// every ISA the CPU has (the fallback at scalar).
TEST(ChannelBlocks, EveryCandidatePutsEachValueWhereTheLayoutsSay) {
  const std::vector<Image> images = {{1, 16, 1},  {3, 16, 15},  {1, 32, 16},  {3, 48, 17},
                                     {2, 16, 32}, {1, 32, 33},  {2, 16, 48},  {1, 16, 64},
                                     {3, 16, 81}, {2, 32, 784}, {64, 64, 196}};
  const int threads = num_threads();
  for (const Image& s : images) {
    const std::vector<uint16_t> nchw = numbered(s.size());
    for (const Isa isa : {best_isa(), Isa::scalar}) {
      IsaLimit limit(isa);
      for (int t : {1, 2, 3}) {
        set_num_threads(t);
        const std::string what = std::to_string(s.n) + " x " + std::to_string(s.c) + " x " +
                                 std::to_string(s.hw) + ", " +
                                 nchw_to_channel_blocks16.select(nullptr, nullptr, 0, 0, 0).name +
                                 ", " + std::to_string(t) + " threads";
        std::vector<uint16_t> blocked(nchw.size()), back(nchw.size());
        nchw_to_channel_blocks16(nchw.data(), blocked.data(), s.n, s.c, s.hw);
        expect_blocked(s, nchw, blocked, what);
        channel_blocks16_to_nchw(blocked.data(), back.data(), s.n, s.c, s.hw);
        EXPECT_EQ(back, nchw) << what;
      }
    }
  }
  set_num_threads(threads);
}

TEST(ChannelBlocks, AvxCandidateWhereTheCpuHasAvx512) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  const std::string want = best_isa() >= Isa::avx512 ? "avx512" : "scalar";
  EXPECT_EQ(nchw_to_channel_blocks16.select(nullptr, nullptr, 1, 16, 1).name, want);
  EXPECT_EQ(channel_blocks16_to_nchw.select(nullptr, nullptr, 1, 16, 1).name, want);
  IsaLimit avx2(Isa::avx2);
  EXPECT_STREQ(channel_blocks16_to_nchw.select(nullptr, nullptr, 1, 16, 1).name, "scalar");
}

}  // namespace
}  // namespace mixp::kernels
