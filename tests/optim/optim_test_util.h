// Helpers of the optimizer tests: parameters and gradients from plain values.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixp/tensor.h"

namespace mixp::test {

inline Tensor parameter(const std::vector<double>& values, DType dtype) {
  Tensor p = from_values(values, Shape{int64_t(values.size())}, dtype, MemoryTag::parameter);
  p.set_requires_grad(true);
  return p;
}

/// Deterministic values of order 1, different for each (seed, i).
inline std::vector<double> values(int seed, size_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7 * double(i) + 1.3 * seed + 0.1);
  return v;
}

/// Sets p's gradient to `g` stored in `dtype`; returns the values as stored.
inline std::vector<double> set_grad(Tensor& p, const std::vector<double>& g, DType dtype) {
  Tensor grad = from_values(g, p.shape(), dtype, MemoryTag::gradient);
  p.set_grad(grad);
  return grad.to_vector();
}

/// The bit patterns of a tensor of 2-byte (bf16, f16) or 4-byte (f32) elements.
template <typename Bits>
std::vector<Bits> bits_of(const Tensor& t) {
  std::vector<Bits> bits(static_cast<size_t>(t.numel()));
  std::memcpy(bits.data(), t.raw_data(), bits.size() * sizeof(Bits));
  return bits;
}

}  // namespace mixp::test
