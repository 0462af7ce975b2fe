// The fp32 master copy of a bf16 parameter, kept in 2 bytes and 1 bit an element instead of 4
// bytes. Private to mixp.
//
// The optimizer keeps every bf16 parameter equal to its fp32 master rounded to nearest even, so
// the parameter already holds the master's top 16 bits, or those bits plus one where the
// master rounded up. The master is therefore the parameter plus the master's low 16 bits, and
// one bit for the single case the low bits cannot tell apart: low bits of exactly 0x8000 (a
// tie), which rounds up from an odd top half and stays on an even one, so that an even
// parameter P can come from the top half P (kept) or P - 1 (rounded up). Recovering the master
// from these three is exact for every finite and infinite fp32 value; a NaN master comes back
// as the quiet NaN of its parameter with its own low bits (its quiet bit set).
//
//   split:  P = round_to_nearest_even(M);  low = M & 0xffff;
//           tie = low == 0x8000 && P != M >> 16 (the tie rounded up), 0 for NaN
//   join:   M = ((P - up) << 16) | low,  up = P not NaN && (low > 0x8000 || low == 0x8000 && tie)
//
// The tie bits are packed 8 a byte, element i in bit i % 8 of byte i / 8. A call's first
// element is bit 0 of ties[0]; split rewrites ceil(n / 8) bytes, with the bits past n zero, so
// a call that does not end the buffer must cover a multiple of 8 elements.
#pragma once

#include <cstdint>

#include "kernels/master_split_isa.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// The fp32 master (f32, n elements) of a bf16 parameter of n elements from the parameter and
/// its master_low (u8: the 2n bytes of the low halves, then the ceil(n / 8) bytes of tie bits).
using JoinBf16MasterFn = void(const Tensor& param, const Tensor& master_low, Tensor& master);
extern Kernel<JoinBf16MasterFn> join_bf16_master;
/// The bf16 parameter and its master_low from an fp32 master: the inverse of join_bf16_master.
using SplitBf16MasterFn = void(const Tensor& master, Tensor& param, Tensor& master_low);
extern Kernel<SplitBf16MasterFn> split_bf16_master;

}  // namespace mixp::kernels
