// Bit-for-bit equality of two tensors, for the tests that hold a fused or fast path to the
// exact bits of another.
#pragma once

#include <cstring>

#include "mixp/tensor.h"

namespace mixp::test {

/// True when a and b are both undefined, or have one shape and dtype and the same bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace mixp::test
