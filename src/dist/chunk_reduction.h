// The local step of the reductions that MPI cannot do itself: N ranks' contributions to one
// chunk, reduced here in rank order.
#pragma once

#include "mixp/dist/communicator.h"

namespace mixp::dist {

/// True when `op` on `dtype` is reduced by reduce_chunks_in_rank_order rather than by MPI: any
/// reduction of bf16 or f16, and ordered_sum of f32 and f64.
bool reduced_in_rank_order(DType dtype, ReduceOp op);

/// `contributions` holds `ranks` chunks of out.count elements, rank 0's first, of out's dtype.
/// out[j] = c_0[j] op c_1[j] op ... op c_{N-1}[j], evaluated left to right from rank 0's value:
///   bf16, f16 with sum or max: in fp32, rounded once to the 16-bit type (nearest, ties to even);
///   bf16, f16 with ordered_sum: each addition in fp32 and rounded to the 16-bit type, as a
///     16-bit tensor addition rounds;
///   f32, f64 with ordered_sum: each addition in the type.
void reduce_chunks_in_rank_order(ConstBuffer contributions, int ranks, Buffer out, ReduceOp op);

}  // namespace mixp::dist
