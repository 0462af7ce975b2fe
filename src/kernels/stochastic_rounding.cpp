// The kernels of kernels/stochastic_rounding.h for the active ISA. The scalar Philox is
// mixp::philox_words in core.
#include "kernels/stochastic_rounding.h"

#include <algorithm>

#include "mixp/cpu.h"

namespace mixp::kernels {

void philox_words(const PhiloxState& state, uint64_t first, uint32_t* out, uint64_t count) {
  if (active_isa() < Isa::avx512) return mixp::philox_words(state, first, out, count);
  avx512::philox_words(state, first, out, count);
}

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

void round_bf16_stochastic(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                           uint16_t* out) {
  active_isa() >= Isa::avx512 ? avx512::round_bf16_stochastic(x, words, shift, n, out)
                              : ref::round_bf16_stochastic(x, words, shift, n, out);
}

}  // namespace mixp::kernels
