// Stochastic rounding to bf16 in bulk: Philox words, and the rounding that consumes them.
// Private to mixp; mixp::convert_stochastic and FP4's stochastic rounding use them.
//
//   philox_words          words first ... first + count - 1 after state.offset of the Philox
//                         stream (mixp/random.h), the words of mixp::philox_words, with 16
//                         Philox blocks (64 words) a step on AVX-512.
//   round_bf16_stochastic out[i] = the bf16 rounding of x[i] by the 16 bits
//                         (words[i] >> shift) & 0xffff, as bfloat16::round_stochastic: NaN
//                         quieted, infinities kept, every other value rounded away from zero
//                         with probability (distance from the value below) / (gap). One word
//                         can round two values, one with shift 0 and one with shift 16.
//
// Every candidate gives the same bits; the scalar ones are the references.
//
//   uint32_t words[256];
//   kernels::philox_words(state, 0, words, 256);
//   kernels::round_bf16_stochastic(x, words, 0, 256, out);
#pragma once

#include <cstdint>

#include "kernels/registry.h"
#include "kernels/stochastic_rounding_isa.h"
#include "mixp/random.h"

namespace mixp::kernels {

using PhiloxWordsFn = void(const PhiloxState& state, uint64_t first, uint32_t* out,
                           uint64_t count);
extern Kernel<PhiloxWordsFn> philox_words;
using RoundBf16StochasticFn = void(const float* x, const uint32_t* words, unsigned shift,
                                   int64_t n, uint16_t* out);
extern Kernel<RoundBf16StochasticFn> round_bf16_stochastic;

}  // namespace mixp::kernels
