// 16-bit images between mixp's NCHW layout and oneDNN's channel-blocked one (nChw16c, oneDNN's
// aBcd16b: the channels in blocks of 16, the 16 values of a block at one pixel adjacent), which
// oneDNN's bf16 convolutions read and write. A copy, so every candidate gives the same bits.
// oneDNN's own reorder between the two took 420 us for the cnn's [64, 32, 28, 28] bf16 on one
// thread, 7 times a memcpy of the same bytes; these, 80-170 us. Private to mixp.
#pragma once

#include <cstdint>

#include "kernels/registry.h"

namespace mixp::kernels {

/// dst [n, c / 16, hw, 16] from src [n, c, hw], or back: 16-bit values (bf16, f16), c a
/// multiple of 16, src and dst not overlapping.
using ChannelBlocksFn = void(const uint16_t* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw);
extern Kernel<ChannelBlocksFn> nchw_to_channel_blocks16;
extern Kernel<ChannelBlocksFn> channel_blocks16_to_nchw;

}  // namespace mixp::kernels
