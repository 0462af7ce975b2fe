// Stochastic rounding to bf16 in bulk: Philox words, and the rounding that consumes them.
// Private to mixp; mixp::convert_stochastic and the optimizers' bf16 state use them.
//
//   philox_words          words first ... first + count - 1 after state.offset of the Philox
//                         stream (mixp/random.h), the words of mixp::philox_words, with 16
//                         Philox blocks (64 words) a step on AVX-512.
//   round_bf16_stochastic out[i] = the bf16 rounding of x[i] by the 16 bits
//                         (words[i] >> shift) & 0xffff, as bfloat16::round_stochastic: NaN
//                         quieted, infinities kept, every other value rounded away from zero
//                         with probability (distance from the value below) / (gap). One word
//                         can round two values, one with shift 0 and one with shift 16.
#pragma once

#include <cstdint>

#include "mixp/random.h"

namespace mixp::kernels {

void philox_words(const PhiloxState& state, uint64_t first, uint32_t* out, uint64_t count);
void round_bf16_stochastic(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                           uint16_t* out);

namespace ref {
void round_bf16_stochastic(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                           uint16_t* out);
}  // namespace ref
namespace avx512 {
/// Whole Philox blocks only: `block` is the first block's index (words 4 * block ...), and
/// `blocks` a multiple of 16.
void philox_blocks(const PhiloxState& state, uint64_t block, uint32_t* out, uint64_t blocks);
/// philox_words with the whole runs of 16 blocks from philox_blocks, the rest scalar.
void philox_words(const PhiloxState& state, uint64_t first, uint32_t* out, uint64_t count);
void round_bf16_stochastic(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                           uint16_t* out);
}  // namespace avx512

}  // namespace mixp::kernels
