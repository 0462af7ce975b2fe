// The CPU candidates of kernels/stochastic_rounding.h: AVX-512, and the scalar references. The
// scalar Philox is mixp::philox_words in core.
#include "kernels/stochastic_rounding.h"

#include <algorithm>

namespace mixp::kernels {

// The words before the first whole block and after the last run of 16 blocks are scalar.
void avx512::philox_words(const PhiloxState& state, uint64_t first, uint32_t* out,
                          uint64_t count) {
  uint64_t word = state.offset + first, done = 0;
  const uint64_t head = std::min<uint64_t>((4 - word % 4) % 4, count);
  mixp::philox_words(state, first, out, head);
  word += head, done += head;
  const uint64_t blocks = (count - done) / 64 * 16;
  avx512::philox_blocks(state, word / 4, out + done, blocks);
  done += 4 * blocks;
  mixp::philox_words(state, first + done, out + done, count - done);
}

Kernel<PhiloxWordsFn> philox_words(
    "philox_words", {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::philox_words},
                     {.name = "scalar", .fn = mixp::philox_words, .fallback = true}});

Kernel<RoundBf16StochasticFn> round_bf16_stochastic(
    "round_bf16_stochastic",
    {{.name = "avx512", .isa = Isa::avx512, .fn = avx512::round_bf16_stochastic},
     {.name = "scalar", .fn = ref::round_bf16_stochastic, .fallback = true}});

}  // namespace mixp::kernels
