// The raw-pointer kernels that split an fp32 master into a bf16 parameter and its low halves
// and tie bits, and join them back (the representation is described in kernels/master_split.h):
// the scalar ones (ref, kernels/ref/master_split_ref.cpp) and the AVX-512 ones
// (kernels/cpu/master_split_avx512.cpp), which give the same bits. Light on purpose: the ISA
// files include it. Private to mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels {

namespace ref {
void split_master_bf16(const float* master, int64_t n, uint16_t* param, uint16_t* low,
                       uint8_t* ties);
void join_master_bf16(const uint16_t* param, const uint16_t* low, const uint8_t* ties, int64_t n,
                      float* master);
}  // namespace ref
namespace avx512 {
void split_master_bf16(const float* master, int64_t n, uint16_t* param, uint16_t* low,
                       uint8_t* ties);
void join_master_bf16(const uint16_t* param, const uint16_t* low, const uint8_t* ties, int64_t n,
                      float* master);
}  // namespace avx512

}  // namespace mixp::kernels
