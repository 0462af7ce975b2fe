// The CPU candidates of kernels/channel_blocks.h: the AVX-512 block transposes over the
// threads, one block of 16 channels of an image a chunk; the fallback, the index loops on the
// calling thread.
#include "kernels/channel_blocks.h"

#include <algorithm>

#include "kernels/channel_blocks_isa.h"
#include "kernels/cpu/parallel.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kBlock = 16;

// Blocks of at least 16384 values a chunk: a block of a 14 x 14 image is 3136.
int64_t grain(int64_t hw) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(kBlock * hw, 1));
}

void to_blocks_avx512(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw) {
  parallel_for(n * (c / kBlock), grain(hw), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      avx512::planes_to_channel_block16(src + b * kBlock * hw, hw, dst + b * kBlock * hw);
  });
}

void from_blocks_avx512(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw) {
  parallel_for(n * (c / kBlock), grain(hw), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      avx512::channel_block16_to_planes(src + b * kBlock * hw, hw, dst + b * kBlock * hw);
  });
}

// Block b = (image, channel block) covers the same kBlock * hw values in both layouts.
void to_blocks_scalar(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw) {
  for (int64_t b = 0; b < n * (c / kBlock); ++b)
    for (int64_t k = 0; k < kBlock; ++k)
      for (int64_t p = 0; p < hw; ++p)
        dst[(b * hw + p) * kBlock + k] = src[(b * kBlock + k) * hw + p];
}

void from_blocks_scalar(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw) {
  for (int64_t b = 0; b < n * (c / kBlock); ++b)
    for (int64_t k = 0; k < kBlock; ++k)
      for (int64_t p = 0; p < hw; ++p)
        dst[(b * kBlock + k) * hw + p] = src[(b * hw + p) * kBlock + k];
}

}  // namespace

Kernel<ChannelBlocksFn> nchw_to_channel_blocks16(
    "nchw_to_channel_blocks16", {{.name = "avx512", .isa = Isa::avx512, .fn = to_blocks_avx512},
                                 {.name = "scalar", .fn = to_blocks_scalar, .fallback = true}});

Kernel<ChannelBlocksFn> channel_blocks16_to_nchw(
    "channel_blocks16_to_nchw", {{.name = "avx512", .isa = Isa::avx512, .fn = from_blocks_avx512},
                                 {.name = "scalar", .fn = from_blocks_scalar, .fallback = true}});

}  // namespace mixp::kernels
