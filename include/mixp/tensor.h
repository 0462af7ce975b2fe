// mixp/tensor.h — the n-dimensional array of mixp, with autograd.
//
// A Tensor has a shape of up to 8 dimensions, a dtype, a device and contiguous row-major storage.
// Copying a Tensor copies a handle: both refer to the same data. Views share storage without
// copying: reshape()/view() of any tensor and slice() along dimension 0; every other change of
// layout (permute, transpose) makes a contiguous copy. Each storage is allocated with a
// MemoryTag, and mixp::memory counts its bytes: a bf16 tensor of n elements takes 2n bytes.
//
// Example:
//
//   using namespace mixp;
//   Tensor w = randn({4, 3}, PhiloxState{/*seed=*/0}).set_requires_grad(true);
//   Tensor x = ones({2, 3});
//   Tensor y = ops::sum(ops::matmul(x, ops::transpose(w, 0, 1)));   // scalar
//   y.backward();                                       // w.grad() is [4, 3]
//   Tensor h = w.to(DType::bf16);                        // rounds to nearest even, 24 bytes
//   std::cout << h << "\n";                              // shape, dtype and values
//
// Every error (a bad shape, a dtype the op does not take) throws mixp::Error naming the op, the
// shapes and the dtypes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mixp/device.h"
#include "mixp/dtype.h"
#include "mixp/memory.h"
#include "mixp/random.h"

namespace mixp {

inline constexpr int kMaxDims = 8;

/// Sizes of up to kMaxDims dimensions, stored inline.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims) : Shape(std::span<const int64_t>(dims)) {}

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[size_t(i)]; }
  int64_t& operator[](int i) { return dims_[size_t(i)]; }
  /// Size of dimension `i`, which may count from the end (-1 is the last). Checked.
  int64_t size(int i) const;
  /// `i` made non-negative; throws naming `op` if it is out of range.
  int normalize_dim(int i, const char* op) const;
  int64_t numel() const;
  std::span<const int64_t> dims() const { return {dims_.data(), size_t(ndim_)}; }
  std::string to_string() const;  // "[2, 3]"

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

namespace autograd {
struct Node;
}
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  ///< an undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int ndim() const { return shape().ndim(); }
  int64_t size(int dim) const { return shape().size(dim); }
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  MemoryTag tag() const;
  size_t nbytes() const { return size_t(numel()) * size_t(size_of(dtype())); }

  /// The elements, checked against the dtype: data<float>() of a bf16 tensor throws.
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;
  void* raw_data();
  const void* raw_data() const;

  /// The value of a one-element tensor, as double.
  double item() const;
  /// All elements as double (for tests and printing).
  std::vector<double> to_vector() const;

  // ---- views and copies ----
  /// The same storage with another shape; one dimension may be -1: t.reshape({3, -1}).
  Tensor reshape(std::vector<int64_t> dims) const;
  /// The same storage with another shape of the same number of elements.
  Tensor view(const Shape& shape) const;
  /// Rows [begin, end) of dimension 0, sharing storage.
  Tensor slice(int64_t begin, int64_t end) const;
  /// A copy with its own storage (tagged `tag`), detached from autograd.
  Tensor clone(MemoryTag tag = MemoryTag::activation) const;
  /// Conversion; rounds to nearest even (differentiable: the gradient converts back).
  Tensor to(DType dtype) const;
  /// A copy on `device` (the same tensor when it is there already), through the devices'
  /// backends (mixp/device.h). A leaf that requires grad stays one; a tensor with autograd
  /// history is refused: move the parameters, not the results of ops.
  Tensor to(Device device) const;
  /// Conversion with stochastic rounding; draws element i at generator offset + i and advances
  /// the generator by numel(). Only fp32 -> bf16 and fp32 -> f16.
  Tensor to(DType dtype, Philox& generator) const;
  /// Copies `src` (same shape; any dtype, rounded) into this tensor's storage. Not recorded by
  /// autograd; bumps the version so that saved copies detect the change.
  void copy_(const Tensor& src);
  /// Sets every element to `value`, in place.
  void fill_(double value);

  // ---- autograd ----
  bool requires_grad() const;
  /// Marks a leaf tensor as a parameter whose gradient backward() accumulates.
  Tensor& set_requires_grad(bool requires_grad);
  /// The accumulated gradient of a leaf, or an undefined tensor.
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  /// The dtype gradients of this leaf accumulate in: its own dtype unless set, for example f32
  /// for a bf16 copy of an fp32 master weight.
  DType grad_dtype() const;
  Tensor& set_grad_dtype(DType dtype);
  /// Backpropagates from this tensor: from a one-element tensor with gradient 1, or from any
  /// tensor with the gradient given. The graph is freed afterwards.
  void backward(const Tensor& gradient = Tensor()) const;
  /// The same data, cut from the graph.
  Tensor detach() const;
  bool is_leaf() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /// Counts in-place changes; a saved tensor that changed before backward is an error.
  uint64_t version() const;

  std::string to_string(int max_elements = 12) const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same tensor.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  const TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// ---- creation ----
/// Uninitialized storage on `device` (mixp/device.h).
Tensor empty(const Shape& shape, DType dtype = DType::f32, MemoryTag tag = MemoryTag::activation,
             Device device = Device::cpu);
/// Filled on `device`, by its backend's fill.
Tensor zeros(const Shape& shape, DType dtype = DType::f32, MemoryTag tag = MemoryTag::activation,
             Device device = Device::cpu);
Tensor ones(const Shape& shape, DType dtype = DType::f32, MemoryTag tag = MemoryTag::activation,
            Device device = Device::cpu);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
            MemoryTag tag = MemoryTag::activation, Device device = Device::cpu);
/// 0, 1, ..., n - 1.
Tensor arange(int64_t n, DType dtype = DType::f32);
/// A copy of shape.numel() elements of `dtype` read from `data` (raw, as the dtype stores them).
Tensor from_buffer(const void* data, const Shape& shape, DType dtype,
                   MemoryTag tag = MemoryTag::activation);
/// A copy of `values` (rounded to `dtype`) with the given shape.
Tensor from_values(std::span<const double> values, const Shape& shape, DType dtype = DType::f32,
                   MemoryTag tag = MemoryTag::activation);
Tensor from_values(std::initializer_list<double> values, const Shape& shape,
                   DType dtype = DType::f32);
/// Standard normal values scaled by `stddev`, element i from generator word offset + 2i, 2i+1.
/// Advances the generator.
Tensor randn(const Shape& shape, Philox& generator, double stddev = 1.0, DType dtype = DType::f32,
             MemoryTag tag = MemoryTag::activation);
/// Uniform in [low, high). Advances the generator.
Tensor uniform(const Shape& shape, Philox& generator, double low, double high,
               DType dtype = DType::f32, MemoryTag tag = MemoryTag::activation);

}  // namespace mixp
