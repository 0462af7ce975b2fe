// The Adam kernel of kernels/adam.h for the active ISA.
#include "kernels/adam.h"

#include "mixp/cpu.h"

namespace mixp::kernels {

void adam_f32(float* w, const float* g, float* m, float* v, int64_t n, const AdamConstants& c) {
  if (active_isa() >= Isa::avx512) {
    avx512::adam_f32(w, g, m, v, n, c);
  } else {
    ref::adam_f32(w, g, m, v, n, c);
  }
}

}  // namespace mixp::kernels
