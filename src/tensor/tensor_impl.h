// The inside of a Tensor. Private to mixp.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "mixp/tensor.h"

namespace mixp {

/// A block of memory, counted by mixp::memory under its tag and dtype.
struct Storage {
  /// `bytes` from `device`'s backend.
  Storage(size_t bytes, MemoryTag tag, DType dtype, Device device = Device::cpu);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  size_t bytes = 0;
  MemoryTag tag;
  DType dtype;
  Device device;
  /// In-place changes of any view of this storage.
  std::atomic<uint64_t> version{0};
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::optional<DType> grad_dtype;
  std::shared_ptr<autograd::Node> grad_fn;         // set for results of recorded ops
  uint32_t output_nr = 0;                          // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;  // for leaves: shared by every use
  std::function<void()> on_accumulated;            // for leaves: after backward added to .grad
  Tensor gradient_storage;                         // for leaves: where a new .grad is written
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  AutogradMeta autograd;

  char* bytes() const {
    return static_cast<char*>(storage->data) + offset * int64_t(size_of(dtype));
  }
};

/// A new tensor viewing `base`'s storage with another shape and offset, without autograd history.
Tensor make_view(const Tensor& base, const Shape& shape, int64_t offset);

}  // namespace mixp
