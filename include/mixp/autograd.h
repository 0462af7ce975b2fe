// mixp/autograd.h — define-by-run reverse-mode differentiation.
//
// Every op that takes a tensor requiring gradients records a Node holding what its backward
// needs. Tensor::backward() runs the nodes in reverse order of creation, accumulates gradients
// into the leaves that asked for them, then frees the graph. Saved tensors keep the dtype they
// were computed in: a bf16 activation is saved as bf16.
//
// Example:
//
//   mixp::Tensor x = mixp::ones({3}).set_requires_grad(true);
//   mixp::Tensor y = mixp::ops::sum(mixp::ops::mul(x, x));
//   y.backward();                         // x.grad() == [2, 2, 2]
//   {
//     mixp::NoGradGuard no_grad;          // evaluation: nothing is recorded
//     mixp::Tensor z = mixp::ops::mul(x, x);
//   }
//
// Writing an op (see src/ops/): compute the result with kernels, then
//
//   if (auto node = autograd::make_node<MulBackward>("mul", {&a, &b})) {
//     node->saved_a = autograd::SavedTensor(a); ...
//     autograd::set_history(result, node);
//   }
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "mixp/tensor.h"

namespace mixp {

/// True while operations are recorded for backward on this thread.
bool grad_mode_enabled();

/// Turns recording off on this thread for the scope (evaluation, optimizer steps).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

struct Node;

/// Where a gradient goes: input `input_nr` of `node`.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
};

/// One recorded operation. apply() receives the gradients of the node's outputs (undefined
/// for an output that got none) and returns one gradient per entry of `next` (undefined for an
/// input that needs none).
struct Node {
  Node();
  virtual ~Node() = default;
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& output_grads) = 0;
  /// Frees what was saved for backward; called once apply() has run.
  virtual void release() {}

  const char* name = "";
  std::vector<Edge> next;  // one per input, in order; an empty node means no gradient
  uint32_t num_outputs = 1;
  uint64_t sequence_nr = 0;  // creation order: later nodes run first
};

/// A tensor kept for backward: its data without its history (so that graphs have no cycles),
/// and its version, so that an in-place change before backward is caught.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  /// The saved data; throws if it was changed in place after it was saved.
  Tensor get() const;
  bool defined() const { return data_.defined(); }
  void reset() { data_ = Tensor(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
};

/// The edge a gradient for `t` flows into, or an empty edge if `t` needs none.
Edge gradient_edge(const Tensor& t);
/// A new node of type N with one edge per input, or nullptr when no input requires grad or
/// grad mode is off: then nothing is recorded.
template <typename N>
std::shared_ptr<N> make_node(const char* name, std::initializer_list<const Tensor*> inputs);
/// Makes `output` the `output_nr`-th result of `node`.
void set_history(Tensor& output, const std::shared_ptr<Node>& node, uint32_t output_nr = 0);

/// Runs backward from `roots` with the given gradients (one per root).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads);

bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

/// Calls `hook` each time backward has added a gradient into `leaf`'s .grad(), right after the
/// addition (once per backward pass that reaches it; a leaf used twice gets one call, with the
/// sum). Data parallelism starts reducing a gradient from it as soon as the gradient is final,
/// while backward goes on. Replaces an earlier hook; an empty function removes it. Throws
/// mixp::Error unless `leaf` is a leaf that requires a gradient.
///
///   autograd::set_gradient_accumulated_hook(weight, [&] { ready.push_back(&weight); });
void set_gradient_accumulated_hook(const Tensor& leaf, std::function<void()> hook);

/// Makes backward write `leaf`'s gradient into `storage` when the leaf has none (the first
/// accumulation of a step assigns into it, as into a new tensor), so that .grad() is then a view
/// of memory the caller owns: data parallelism reduces gradients in place in its buckets. Used
/// only while `storage`'s dtype is the leaf's gradient dtype; an undefined tensor removes it.
/// Throws mixp::Error unless `leaf` is a leaf that requires a gradient and `storage` has its
/// shape. The caller keeps the storage from being read elsewhere while .grad() is in use.
///
///   autograd::set_gradient_storage(weight, bucket.slice(at, at + weight.numel()).view(shape));
void set_gradient_storage(const Tensor& leaf, const Tensor& storage);

/// Sees the gradient that reaches a tensor during backward (diagnostics: mixp/diag/collector.h).
using GradientHook = std::function<void(const Tensor& gradient)>;
/// An alias of `t` (the same storage, shape and dtype) whose gradient passes unchanged through
/// `hook` on its way back to `t`: use the alias in place of `t` downstream. Returns `t` itself,
/// and the hook never runs, when `t` requires no gradient or grad mode is off.
///
///   Tensor y = autograd::with_gradient_hook(layer_output, [](const Tensor& g) { ... });
Tensor with_gradient_hook(const Tensor& t, GradientHook hook);

template <typename N>
std::shared_ptr<N> make_node(const char* name, std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode_enabled() || !any_requires_grad(inputs)) return nullptr;
  auto node = std::make_shared<N>();
  node->name = name;
  node->next.reserve(inputs.size());
  for (const Tensor* t : inputs) node->next.push_back(t ? gradient_edge(*t) : Edge{});
  return node;
}

}  // namespace autograd
}  // namespace mixp
