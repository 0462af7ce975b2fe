// The implementations of the stochastic-rounding kernels (kernels/stochastic_rounding.h), one
// namespace per instruction set: ref (kernels/ref/stochastic_rounding_ref.cpp; the scalar Philox
// is mixp::philox_words in core) and avx512 (kernels/cpu/, compiled with its flags). Light on
// purpose: the ISA files include it, and no inline function may cross files compiled for
// different ISAs. Private to mixp.
#pragma once

#include <cstdint>

#include "mixp/random.h"

namespace mixp::kernels {

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
