// mixp/amp/autocast.h — automatic mixed precision: a scope in which every op picks the dtype
// it computes in from its row of the OpKind table (mixp/op_kind.h), as torch.autocast does.
//
// Example (the forward pass of a training step; backward may run inside or outside the scope):
//
//   using namespace mixp;
//   Tensor w = randn({256, 784}, rng, 0.05).set_requires_grad(true);   // fp32 master weight
//   Tensor loss;
//   {
//     amp::Autocast autocast(DType::bf16);
//     Tensor h = ops::linear(x, w);          // lower_precision: x and w cast to bf16, h is bf16
//     Tensor p = ops::softmax(h);            // fp32_compute: widened, computed, back to bf16
//     loss = ops::cross_entropy(h, labels);  // fp32_compute with an fp32 result
//     {
//       amp::Autocast off(DType::bf16, /*enabled=*/false);   // a region in plain fp32
//     }
//   }
//   loss.backward();                         // w.grad() is fp32, through the cast's node
//
// The policies (CastPolicy), applied only to floating inputs; integer inputs (indices, class
// targets) are never cast, nor are f64 inputs under lower_precision and fp32_compute (as in
// PyTorch: f64 is asked for explicitly), nor fp8 inputs:
//   lower_precision  f32 / f16 / bf16 inputs cast to the autocast dtype; the kernels accumulate
//                    in fp32 and the output has the autocast dtype.
//   fp32_compute     f16 / bf16 inputs widened to f32; the output is f32 when the row says
//                    fp32_output, else it is rounded back to the first floating input's dtype.
//   promote          mixed floating dtypes go to the widest: f64 > f32 > bf16, f16; bf16 with
//                    f16 gives f32.
//   banned           throws mixp::Error naming the op and the op to use instead.
//   keep             no cast.
//
// Weight cache: inside the outermost enabled scope of a thread, an f32 leaf that requires
// gradients (a parameter) is cast to the autocast dtype once and the cast reused by every op
// that takes it, keyed by the tensor and its version(): a parameter changed in place (an
// optimizer step) is cast again. The cast is recorded by autograd, so gradients flow back to
// the f32 leaf through the one cast node that all its uses share. The cache is emptied when the
// outermost enabled scope exits.
//
// The state is per thread: a scope on one thread changes nothing on another. Inside an op's
// body, and during backward, autocast is suspended: ops that an op calls internally, and the
// ops of backward, run in the dtypes they are given.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "mixp/dtype.h"
#include "mixp/op_kind.h"
#include "mixp/tensor.h"

namespace mixp::amp {

/// A thread-local RAII scope: ops run under their cast policy while one that is enabled is the
/// innermost. `dtype` is bf16 or f16 (else mixp::Error). Scopes nest; an inner scope replaces
/// the outer's dtype and enabled flag until it exits.
class Autocast {
 public:
  explicit Autocast(DType dtype, bool enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool previous_enabled_;
  DType previous_dtype_;
  bool enabled_;
};

/// True when ops on this thread apply their cast policy: inside an enabled scope, and not
/// inside an op's body or a backward pass.
bool autocast_enabled();
/// The dtype of the innermost scope on this thread (bf16 when there is none).
DType autocast_dtype();

/// One op's inputs after its cast policy, in the order given (undefined inputs stay
/// undefined), and the rule for its result. While it lives, autocast is suspended on this
/// thread, so an op holds it for the length of its body.
class CastInputs {
 public:
  ~CastInputs();
  CastInputs(const CastInputs&) = delete;
  CastInputs& operator=(const CastInputs&) = delete;

  const Tensor& operator[](size_t i) const { return tensors_[i]; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  /// The dtype results are rounded to (fp32_compute without fp32_output), if any.
  std::optional<DType> output_dtype() const { return output_dtype_; }
  /// The op's result under the policy: a floating result converted (differentiably) to
  /// output_dtype() when there is one; otherwise `result` itself.
  Tensor output(Tensor result) const;
  std::vector<Tensor> output(std::vector<Tensor> results) const;
  /// Whether autocast applied the policy (it was enabled at the call).
  bool applied() const { return suspend_; }

 private:
  friend CastInputs autocast_inputs(const OpInfo& row, std::span<const Tensor* const> inputs);
  CastInputs(std::vector<Tensor> tensors, std::optional<DType> output_dtype, bool suspend);

  std::vector<Tensor> tensors_;
  std::optional<DType> output_dtype_;
  bool suspend_;
};

/// Applies `op`'s row of the table to its inputs; each op's public function calls it once, first:
///   const auto cast = amp::autocast_inputs(OpKind::matmul, {&a, &b});
///   return cast.output(product(cast[0], cast[1]));
/// Null pointers and undefined tensors pass through as undefined tensors.
CastInputs autocast_inputs(OpKind op, std::initializer_list<const Tensor*> inputs);
CastInputs autocast_inputs(OpKind op, std::span<const Tensor> inputs);
/// The same for a row given by value: the policy function itself, for tests of every policy.
CastInputs autocast_inputs(const OpInfo& row, std::span<const Tensor* const> inputs);

/// What the weight cache of this thread holds and has done since the thread started.
struct WeightCacheStats {
  size_t entries = 0;  ///< casts held now
  uint64_t casts = 0;  ///< casts made and stored
  uint64_t hits = 0;   ///< uses served from the cache
};
WeightCacheStats weight_cache_stats();

/// How many times ops of `kind` asked this thread for their policy, with autocast on or off:
/// shows that an op's public function applies it (a test runs every op and checks each kind).
uint64_t policy_calls(OpKind kind);

}  // namespace mixp::amp
