// kernels/vmath.h's bf16 gelu on AVX-512 BF16: the lanes of vmath_avx512.cpp, rounded 32 at a
// time by vcvtne2ps2bf16 (with the subnormal fix-up of bf16_round_avx512_bf16.h), where the
// AVX-512 F integer rounding takes a third of the kernels' time.
// The same bits as the scalar kernels; the tail is masked, not scalar.
#include "kernels/cpu/bf16_round_avx512_bf16.h"
#include "kernels/cpu/vmath_lanes_avx512.h"

namespace mixp::kernels::avx512_bf16 {

void gelu_tanh_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
  rows_to_bf16(n, y,
               [&](int64_t i, __mmask16 m) { return lanes::gelu16(lanes::load_bf16(x + i, m)); });
}

void gelu_tanh_backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx, int64_t n) {
  rows_to_bf16(n, dx, [&](int64_t i, __mmask16 m) {
    return lanes::gelu_grad16(lanes::load_bf16(g + i, m), lanes::load_bf16(x + i, m));
  });
}

}  // namespace mixp::kernels::avx512_bf16
