// mixp/op_kind.h — the closed set of ops, and one table that gives each its name and its
// autocast policy. Adding an op to the enum without a row breaks the build (static_assert).
//
// Example:
//
//   const mixp::OpInfo& info = mixp::op_info(mixp::OpKind::softmax);
//   // info.name == "softmax", info.policy == mixp::CastPolicy::fp32_compute,
//   // info.fp32_output == false: softmax computes in fp32 and returns the input's dtype
#pragma once

#include <cstdint>
#include <span>

namespace mixp {

// One line per group of ops.
// clang-format off
enum class OpKind : uint16_t {
  // elementwise
  add,
  sub,
  mul,
  div,
  add_scalar,
  mul_scalar,
  neg,
  exp,
  log,
  sqrt,
  rsqrt,
  pow_scalar,
  tanh,
  sigmoid,
  relu,
  gelu,
  gelu_tanh,
  silu,
  // reductions
  sum,
  mean,
  max,
  // linear algebra
  matmul,
  linear,
  bmm,
  // softmax and losses
  softmax,
  log_softmax,
  cross_entropy,
  mse_loss,
  // layout
  transpose,
  permute,
  // indexing, randomness, joining and cutting, attention
  embedding,
  dropout,
  cat,
  split,
  narrow,
  scaled_dot_product_attention,
  // convolution and pooling
  conv2d,
  max_pool2d,
  avg_pool2d,
  adaptive_avg_pool2d,
  // normalization
  layer_norm,
  batch_norm,
  // layout, fused
  split_heads,
  multi_head_attention,
  // normalization, fused
  batch_norm_relu,
  batch_norm_relu_max_pool2d,
  count  // not an op: the number of ops; new ops go above it, each with a row in op_kind.cpp
};
// clang-format on
inline constexpr int kOpKindCount = int(OpKind::count);

/// What autocast does with an op's floating inputs (mixp/amp/autocast.h).
enum class CastPolicy : uint8_t {
  lower_precision,  ///< inputs cast to the autocast dtype; fp32 accumulation; low-precision output
  fp32_compute,     ///< inputs widened to fp32; output fp32 or the input's dtype (fp32_output)
  promote,          ///< mixed inputs go to the widest input dtype
  banned,           ///< refused under autocast, with the safe alternative named
  keep,             ///< runs in the dtype it is given (exact or dtype-agnostic ops)
};

struct OpInfo {
  OpKind kind;
  const char* name;
  CastPolicy policy;
  bool fp32_output;  ///< for fp32_compute: the result is fp32 (losses, reductions)
  /// For banned: the op (or recipe) to use instead, named in the error. To ban an op, set its
  /// row's policy to banned and say here what is safe, e.g. PyTorch bans binary_cross_entropy
  /// under autocast with "binary_cross_entropy_with_logits".
  const char* alternative = nullptr;
  /// For fp32_compute: the op's kernels read bf16 and f16 inputs and compute (and, where
  /// fp32_output, return) fp32 themselves, so autocast need not widen the inputs: a widened
  /// copy would only cost memory, as it is saved for backward. True for every fp32_compute op
  /// whose output keeps the input's dtype (normalizations, softmax, pooling), and for
  /// cross_entropy. For promote (add, sub): an fp32 and a bf16 or f16 input of the same shape
  /// reach the op as they are; it reads the narrow one widened block by block and returns fp32,
  /// the same values as after autocast's widened copy, without the copy (the residual adds of
  /// a transformer under autocast).
  bool fp32_inside = false;
};

const OpInfo& op_info(OpKind kind);
std::span<const OpInfo> all_ops();
const char* name_of(OpKind kind);
const char* name_of(CastPolicy policy);

}  // namespace mixp
