// The scalar rounding of kernels/stochastic_rounding.h: the bits of every ISA's.
#include <bit>

#include "kernels/stochastic_rounding_isa.h"
#include "mixp/float_types.h"

namespace mixp::kernels::ref {

void round_bf16_stochastic(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                           uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] =
        detail::round_f32_bits_to_bf16_stochastic(std::bit_cast<uint32_t>(x[i]), words[i] >> shift);
  }
}

}  // namespace mixp::kernels::ref
