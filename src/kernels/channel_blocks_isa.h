// The AVX-512 block transposes behind kernels/channel_blocks.h. Light on purpose: the ISA file
// includes it, and no inline function may cross files compiled for different ISAs. Private to
// mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels::avx512 {

/// One block of 16 channels: blocked[p * 16 + k] = planes[k * hw + p] for p < hw, k < 16.
void planes_to_channel_block16(const uint16_t* planes, int64_t hw, uint16_t* blocked);
/// The inverse: planes[k * hw + p] = blocked[p * 16 + k].
void channel_block16_to_planes(const uint16_t* blocked, int64_t hw, uint16_t* planes);

}  // namespace mixp::kernels::avx512
