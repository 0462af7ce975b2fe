#include "mixp/op_kind.h"

namespace mixp {
namespace {

using enum CastPolicy;
constexpr OpInfo kOps[] = {
    // add, sub, mul, div, cat: promote, the counterpart of PyTorch's native type promotion
    // (PyTorch lists only cat among these; the others promote without autocast there). add and
    // sub read an fp32 and a bf16 (or f16) input of one shape as they are (fp32_inside).
    {.kind = OpKind::add,
     .name = "add",
     .policy = promote,
     .fp32_output = false,
     .fp32_inside = true},
    {.kind = OpKind::sub,
     .name = "sub",
     .policy = promote,
     .fp32_output = false,
     .fp32_inside = true},
    {.kind = OpKind::mul, .name = "mul", .policy = promote, .fp32_output = false},
    {.kind = OpKind::div, .name = "div", .policy = promote, .fp32_output = false},
    {.kind = OpKind::add_scalar, .name = "add_scalar", .policy = keep, .fp32_output = false},
    {.kind = OpKind::mul_scalar, .name = "mul_scalar", .policy = keep, .fp32_output = false},
    {.kind = OpKind::neg, .name = "neg", .policy = keep, .fp32_output = false},
    {.kind = OpKind::exp, .name = "exp", .policy = fp32_compute, .fp32_output = true},
    {.kind = OpKind::log, .name = "log", .policy = fp32_compute, .fp32_output = true},
    {.kind = OpKind::sqrt, .name = "sqrt", .policy = keep, .fp32_output = false},
    {.kind = OpKind::rsqrt, .name = "rsqrt", .policy = fp32_compute, .fp32_output = true},
    {.kind = OpKind::pow_scalar, .name = "pow_scalar", .policy = fp32_compute, .fp32_output = true},
    {.kind = OpKind::tanh, .name = "tanh", .policy = keep, .fp32_output = false},
    {.kind = OpKind::sigmoid, .name = "sigmoid", .policy = keep, .fp32_output = false},
    {.kind = OpKind::relu, .name = "relu", .policy = keep, .fp32_output = false},
    {.kind = OpKind::gelu, .name = "gelu", .policy = keep, .fp32_output = false},
    {.kind = OpKind::gelu_tanh, .name = "gelu_tanh", .policy = keep, .fp32_output = false},
    {.kind = OpKind::silu, .name = "silu", .policy = keep, .fp32_output = false},
    {.kind = OpKind::sum, .name = "sum", .policy = fp32_compute, .fp32_output = true},
    // Not in PyTorch's lists (its mean accumulates in fp32 and keeps the dtype); fp32 here, as
    // sum, since means feed losses and statistics.
    {.kind = OpKind::mean, .name = "mean", .policy = fp32_compute, .fp32_output = true},
    {.kind = OpKind::max, .name = "max", .policy = keep, .fp32_output = false},
    {.kind = OpKind::matmul, .name = "matmul", .policy = lower_precision, .fp32_output = false},
    {.kind = OpKind::linear, .name = "linear", .policy = lower_precision, .fp32_output = false},
    {.kind = OpKind::bmm, .name = "bmm", .policy = lower_precision, .fp32_output = false},
    // Probabilities in [0, 1] need relative precision only, which bf16 has; an fp32 result would
    // double the output softmax saves for backward. (PyTorch returns fp32.)
    {.kind = OpKind::softmax,
     .name = "softmax",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
    // Log-probabilities are large negative numbers whose small differences losses need: fp32.
    {.kind = OpKind::log_softmax,
     .name = "log_softmax",
     .policy = fp32_compute,
     .fp32_output = true},
    {.kind = OpKind::cross_entropy,
     .name = "cross_entropy",
     .policy = fp32_compute,
     .fp32_output = true,
     .fp32_inside = true},
    {.kind = OpKind::mse_loss, .name = "mse_loss", .policy = fp32_compute, .fp32_output = true},
    {.kind = OpKind::transpose, .name = "transpose", .policy = keep, .fp32_output = false},
    {.kind = OpKind::permute, .name = "permute", .policy = keep, .fp32_output = false},
    {.kind = OpKind::embedding, .name = "embedding", .policy = keep, .fp32_output = false},
    {.kind = OpKind::dropout, .name = "dropout", .policy = keep, .fp32_output = false},
    {.kind = OpKind::cat, .name = "cat", .policy = promote, .fp32_output = false},
    {.kind = OpKind::split, .name = "split", .policy = keep, .fp32_output = false},
    {.kind = OpKind::narrow, .name = "narrow", .policy = keep, .fp32_output = false},
    {.kind = OpKind::scaled_dot_product_attention,
     .name = "scaled_dot_product_attention",
     .policy = lower_precision,
     .fp32_output = false},
    {.kind = OpKind::conv2d, .name = "conv2d", .policy = lower_precision, .fp32_output = false},
    {.kind = OpKind::max_pool2d, .name = "max_pool2d", .policy = keep, .fp32_output = false},
    // A mean of a window, rounded once: the result is as exact in the input dtype as a cast of
    // an fp32 result would be, and the next layer (a conv) takes the input dtype anyway.
    {.kind = OpKind::avg_pool2d,
     .name = "avg_pool2d",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
    // As avg_pool2d: a windowed mean rounded once; its consumer is a linear or conv layer.
    {.kind = OpKind::adaptive_avg_pool2d,
     .name = "adaptive_avg_pool2d",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
    // Normalizations compute their statistics in fp32 inside whatever the input dtype, and
    // return the input's dtype: the next op consumes the activation in the compute dtype.
    // No op is banned now. To ban one, give its row the policy banned and name the safe op in
    // OpInfo::alternative, e.g. {.., .policy = banned, .fp32_output = false,
    // .alternative = "binary_cross_entropy_with_logits"}.
    // Its output feeds a linear layer, which casts to the compute dtype: returning fp32 (as
    // PyTorch does) would only add a cast and double the activation.
    {.kind = OpKind::layer_norm,
     .name = "layer_norm",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
    // Its output feeds a conv; statistics and running stats stay fp32 inside the op.
    {.kind = OpKind::batch_norm,
     .name = "batch_norm",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
    {.kind = OpKind::split_heads, .name = "split_heads", .policy = keep, .fp32_output = false},
    // split_heads, scaled_dot_product_attention and the merge of the heads in one op: the
    // attention's policy.
    {.kind = OpKind::multi_head_attention,
     .name = "multi_head_attention",
     .policy = lower_precision,
     .fp32_output = false},
    // batch_norm then relu: batch_norm's policy (relu keeps its input's dtype).
    {.kind = OpKind::batch_norm_relu,
     .name = "batch_norm_relu",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
    // batch_norm_relu then 2 x 2 max pooling: batch_norm's policy (pooling keeps its input's
    // dtype).
    {.kind = OpKind::batch_norm_relu_max_pool2d,
     .name = "batch_norm_relu_max_pool2d",
     .policy = fp32_compute,
     .fp32_output = false,
     .fp32_inside = true},
};
static_assert(std::size(kOps) == size_t(kOpKindCount), "every OpKind needs a row in kOps");

constexpr bool rows_in_enum_order() {
  for (int i = 0; i < kOpKindCount; ++i) {
    if (int(kOps[i].kind) != i) return false;
  }
  return true;
}
static_assert(rows_in_enum_order(), "kOps rows must follow the OpKind order");

// An fp32_compute op that returns its input's dtype computes in fp32 inside its kernels; if
// autocast widened its inputs it would only save a wider copy for backward.
constexpr bool narrow_output_rows_compute_inside() {
  for (const OpInfo& row : kOps) {
    if (row.policy == CastPolicy::fp32_compute && !row.fp32_output && !row.fp32_inside)
      return false;
  }
  return true;
}
static_assert(narrow_output_rows_compute_inside(),
              "fp32_compute rows with fp32_output = false must set fp32_inside");

}  // namespace

const OpInfo& op_info(OpKind kind) { return kOps[size_t(kind)]; }
std::span<const OpInfo> all_ops() { return kOps; }
const char* name_of(OpKind kind) { return op_info(kind).name; }

const char* name_of(CastPolicy policy) {
  switch (policy) {
    case lower_precision: return "lower_precision";
    case fp32_compute: return "fp32_compute";
    case promote: return "promote";
    case banned: return "banned";
    case keep: return "keep";
  }
  return "unknown";
}

}  // namespace mixp
