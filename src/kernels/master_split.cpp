// The kernels of kernels/master_split.h for the active ISA.
#include "kernels/master_split.h"

#include "mixp/cpu.h"

namespace mixp::kernels {

void split_master_bf16(const float* master, int64_t n, uint16_t* param, uint16_t* low,
                       uint8_t* ties) {
  active_isa() >= Isa::avx512 ? avx512::split_master_bf16(master, n, param, low, ties)
                              : ref::split_master_bf16(master, n, param, low, ties);
}

void join_master_bf16(const uint16_t* param, const uint16_t* low, const uint8_t* ties, int64_t n,
                      float* master) {
  active_isa() >= Isa::avx512 ? avx512::join_master_bf16(param, low, ties, n, master)
                              : ref::join_master_bf16(param, low, ties, n, master);
}

}  // namespace mixp::kernels
