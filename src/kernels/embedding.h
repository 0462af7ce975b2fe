// embedding's kernels: rows of a [V, D] table gathered by index, and their gradient scattered
// back. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// out row p = weight row indices[p], a copy of the bytes (exact). weight [V, D] of any dtype;
/// indices i64, every value already checked to be in [0, V); out [indices.numel(), D] (any
/// shape with those elements) in weight's dtype.
using EmbeddingGatherFn = void(const Tensor& weight, const Tensor& indices, Tensor& out);
extern Kernel<EmbeddingGatherFn> embedding_gather;

/// dweight row v = the sum of g row p over the positions p with indices[p] == v, summed in
/// increasing p in fp32 (f64 for f64; the fallback in double) and rounded once to dweight's
/// dtype, g's. g [indices.numel(), D] (any shape with those elements); dweight [V, D]; rows no
/// index reads are zero.
using EmbeddingScatterAddFn = void(const Tensor& g, const Tensor& indices, Tensor& dweight);
extern Kernel<EmbeddingScatterAddFn> embedding_scatter_add;

/// Throws mixp::Error naming the first position of indices (i64, any shape) whose value is not
/// a row of weight [V, D], i.e. not in [0, V); returns when every index is one.
using EmbeddingCheckIndicesFn = void(const Tensor& indices, const Tensor& weight);
extern Kernel<EmbeddingCheckIndicesFn> embedding_check_indices;

}  // namespace mixp::kernels
