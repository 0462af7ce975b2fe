#include "mixp/op_kind.h"

namespace mixp {
namespace {

using enum CastPolicy;
constexpr OpInfo kOps[] = {
    // add, sub, mul, div, cat: promote, the counterpart of PyTorch's native type promotion
    // (PyTorch lists only cat among these; the others promote without autocast there). add and
    // sub read an fp32 and a bf16 (or f16) input of one shape as they are (fp32_inside).
    {OpKind::add, "add", promote, false, nullptr, true},
    {OpKind::sub, "sub", promote, false, nullptr, true},
    {OpKind::mul, "mul", promote, false},
    {OpKind::div, "div", promote, false},
    {OpKind::add_scalar, "add_scalar", keep, false},
    {OpKind::mul_scalar, "mul_scalar", keep, false},
    {OpKind::neg, "neg", keep, false},
    {OpKind::exp, "exp", fp32_compute, true},
    {OpKind::log, "log", fp32_compute, true},
    {OpKind::sqrt, "sqrt", keep, false},
    {OpKind::rsqrt, "rsqrt", fp32_compute, true},
    {OpKind::pow_scalar, "pow_scalar", fp32_compute, true},
    {OpKind::tanh, "tanh", keep, false},
    {OpKind::sigmoid, "sigmoid", keep, false},
    {OpKind::relu, "relu", keep, false},
    {OpKind::gelu, "gelu", keep, false},
    {OpKind::gelu_tanh, "gelu_tanh", keep, false},
    {OpKind::silu, "silu", keep, false},
    {OpKind::sum, "sum", fp32_compute, true},
    // Not in PyTorch's lists (its mean accumulates in fp32 and keeps the dtype); fp32 here, as
    // sum, since means feed losses and statistics.
    {OpKind::mean, "mean", fp32_compute, true},
    {OpKind::max, "max", keep, false},
    {OpKind::matmul, "matmul", lower_precision, false},
    {OpKind::linear, "linear", lower_precision, false},
    {OpKind::bmm, "bmm", lower_precision, false},
    // Probabilities in [0, 1] need relative precision only, which bf16 has; an fp32 result would
    // double the output softmax saves for backward. (PyTorch returns fp32.)
    {OpKind::softmax, "softmax", fp32_compute, false, nullptr, true},
    // Log-probabilities are large negative numbers whose small differences losses need: fp32.
    {OpKind::log_softmax, "log_softmax", fp32_compute, true},
    {OpKind::cross_entropy, "cross_entropy", fp32_compute, true, nullptr, true},
    {OpKind::mse_loss, "mse_loss", fp32_compute, true},
    {OpKind::transpose, "transpose", keep, false},
    {OpKind::permute, "permute", keep, false},
    {OpKind::embedding, "embedding", keep, false},
    {OpKind::dropout, "dropout", keep, false},
    {OpKind::cat, "cat", promote, false},
    {OpKind::split, "split", keep, false},
    {OpKind::narrow, "narrow", keep, false},
    {OpKind::scaled_dot_product_attention, "scaled_dot_product_attention", lower_precision, false},
    {OpKind::conv2d, "conv2d", lower_precision, false},
    {OpKind::max_pool2d, "max_pool2d", keep, false},
    // A mean of a window, rounded once: the result is as exact in the input dtype as a cast of
    // an fp32 result would be, and the next layer (a conv) takes the input dtype anyway.
    {OpKind::avg_pool2d, "avg_pool2d", fp32_compute, false, nullptr, true},
    // As avg_pool2d: a windowed mean rounded once; its consumer is a linear or conv layer.
    {OpKind::adaptive_avg_pool2d, "adaptive_avg_pool2d", fp32_compute, false, nullptr, true},
    // Normalizations compute their statistics in fp32 inside whatever the input dtype, and
    // return the input's dtype: the next op consumes the activation in the compute dtype.
    // No op is banned now. To ban one, give its row the policy banned and the safe op as a
    // fifth field (OpInfo::alternative), e.g. {.., banned, false,
    // "binary_cross_entropy_with_logits"}.
    // Its output feeds a linear layer, which casts to the compute dtype: returning fp32 (as
    // PyTorch does) would only add a cast and double the activation.
    {OpKind::layer_norm, "layer_norm", fp32_compute, false, nullptr, true},
    // Its output feeds a conv; statistics and running stats stay fp32 inside the op.
    {OpKind::batch_norm, "batch_norm", fp32_compute, false, nullptr, true},
    {OpKind::split_heads, "split_heads", keep, false},
    // split_heads, scaled_dot_product_attention and the merge of the heads in one op: the
    // attention's policy.
    {OpKind::multi_head_attention, "multi_head_attention", lower_precision, false},
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
