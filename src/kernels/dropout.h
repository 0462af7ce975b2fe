// dropout's kernel. Private to mixp.
#pragma once

#include "kernels/registry.h"
#include "mixp/random.h"

namespace mixp::kernels {

/// out[i] = kept(i) ? in[i] / (1 - p) : 0 over contiguous in and out of one floating dtype (x in
/// the forward, the gradient in the backward). Element i is kept iff Philox word (rng.offset +
/// i), read as a uniform in [0, 1) from its top 24 bits, is >= p. The product is computed in fp32
/// (f64 for f64; the fallback in double) and rounded once to the dtype.
using DropoutMaskFn = void(const Tensor& in, Tensor& out, const PhiloxState& rng, double p);
extern Kernel<DropoutMaskFn> dropout_mask;

}  // namespace mixp::kernels
