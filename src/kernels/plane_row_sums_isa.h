// The AVX-512 row sums of an image plane behind conv2d's bias gradient (kernels/conv2d.h).
// Light on purpose: the ISA file includes it, and no inline function may cross files compiled
// for different ISAs. Private to mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels::avx512 {

/// rows[r] = the sum of plane[r * w + i] for i = 0, 1, ..., w - 1, in that order from +0 in
/// fp32, for each r < h: the chain of additions of the scalar loop, so the same bits. 16 rows
/// are summed in the lanes of a vector, each 16 x 16 block transposed in registers. w <= 256
/// (one of ops::sum's blocks a row). The plane should be in L1: its masked row loads, 16 rows
/// at a time, took twice the scalar loop's time on a plane read from memory.
void plane_row_sums_f32(const float* plane, int64_t h, int64_t w, float* rows);

}  // namespace mixp::kernels::avx512
