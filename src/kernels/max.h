// max and argmax along the middle dimension of [outer, n, inner]: the position of each line's
// maximum, and copies of elements to and from those positions. Private to mixp.
#pragma once

#include "kernels/lines.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// index[o, i] = the k in [0, n) of the maximum of x[o, k, i], compared as doubles (exact for
/// every floating dtype): a NaN is the maximum, and among equal values the first k wins.
/// n >= 1; index is i64 with outer * inner elements.
using ArgmaxLinesFn = void(const Tensor& x, Lines lines, Tensor& index);
extern Kernel<ArgmaxLinesFn> argmax_lines;

/// values[o, i] = x[o, index[o, i], i], copied bit for bit (any dtype, the same in both).
using TakeAlongLinesFn = void(const Tensor& x, Lines lines, const Tensor& index, Tensor& values);
extern Kernel<TakeAlongLinesFn> take_along_lines;

/// dx[o, index[o, i], i] = g[o, i], copied bit for bit; the other elements of dx are kept.
using PutAlongLinesFn = void(const Tensor& g, Lines lines, const Tensor& index, Tensor& dx);
extern Kernel<PutAlongLinesFn> put_along_lines;

}  // namespace mixp::kernels
