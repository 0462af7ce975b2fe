// The local step of a 16-bit reduction: N ranks' contributions to one chunk, reduced in fp32 in
// rank order and rounded once to the 16-bit type.
#pragma once

#include "mixp/dist/communicator.h"

namespace mixp::dist {

/// `contributions` holds `ranks` chunks of out.count elements, rank 0's first, of dtype bf16 or
/// f16 like `out`. out[j] = round(c_0[j] op c_1[j] op ... op c_{N-1}[j]), evaluated left to right
/// in fp32, rounded to nearest even once.
void reduce_chunks_in_fp32(ConstBuffer contributions, int ranks, Buffer out, ReduceOp op);

}  // namespace mixp::dist
