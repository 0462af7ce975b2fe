// The copy behind concatenation and splitting along one dimension. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// dst[.., dst_start + j, ..] = src[.., src_start + j, ..] for j < length along dimension
/// `dim`, each element copied bit for bit. src and dst are contiguous, of one dtype, and of the
/// same size in every other dimension; both ranges lie inside their tensors.
using CopyAlongFn = void(const Tensor& src, int64_t src_start, Tensor& dst, int64_t dst_start,
                         int dim, int64_t length);
extern Kernel<CopyAlongFn> copy_along;

}  // namespace mixp::kernels
