// mixp/ops.h — the differentiable operations on tensors.
//
// Every op takes floating tensors of f32, f64, f16 or bf16, computes in fp32 (f64 for f64
// inputs) and rounds its result once to the output dtype, which is the input dtype unless the
// op says otherwise. Every op records itself for backward when an input requires gradients
// (mixp/autograd.h). Shapes and dtypes are checked, and a mismatch throws mixp::Error naming
// the op, the shapes and the dtypes.
//
// Example (a two-layer perceptron's loss):
//
//   using namespace mixp;
//   Philox rng({/*seed=*/0});
//   Tensor x = randn({32, 784}, rng), w1 = randn({256, 784}, rng, 0.05).set_requires_grad(true);
//   Tensor w2 = randn({10, 256}, rng, 0.05).set_requires_grad(true);
//   Tensor labels = from_values(..., {32}, DType::i64);
//   Tensor h = ops::relu(ops::linear(x, w1));
//   Tensor loss = ops::cross_entropy(ops::linear(h, w2), labels);
//   loss.backward();
#pragma once

#include <optional>
#include <vector>

#include "mixp/tensor.h"

namespace mixp::ops {

// ---- elementwise, with NumPy broadcasting for the binary ones ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add_scalar(const Tensor& x, double s);  ///< x + s
Tensor mul_scalar(const Tensor& x, double s);  ///< x * s
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);  ///< 1 / sqrt(x)
Tensor pow(const Tensor& x, double exponent);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);       ///< x * Phi(x), with the error function
Tensor gelu_tanh(const Tensor& x);  ///< the tanh approximation of GPT-2
Tensor silu(const Tensor& x);       ///< x * sigmoid(x)

// ---- reductions ----
/// Sum over `dims` (all dimensions when empty), accumulated in fp32; keepdim keeps them as 1.
Tensor sum(const Tensor& x, std::vector<int> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int> dims = {}, bool keepdim = false);
/// Largest value along `dim`; the gradient goes to the first position of the maximum.
Tensor max(const Tensor& x, int dim, bool keepdim = false);
/// Index of the largest value along `dim` (i64; not differentiable).
Tensor argmax(const Tensor& x, int dim, bool keepdim = false);

// ---- linear algebra: fp32 accumulation; output dtype the inputs' unless given ----
/// a [..., M, K] times b [K, N] or [..., K, N] (same leading dims).
Tensor matmul(const Tensor& a, const Tensor& b, std::optional<DType> out_dtype = std::nullopt);
/// x [..., in] times weight [out, in] transposed, plus bias [out] if defined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::optional<DType> out_dtype = std::nullopt);
/// a [B, M, K] times b [B, K, N].
Tensor bmm(const Tensor& a, const Tensor& b, std::optional<DType> out_dtype = std::nullopt);

// ---- softmax and losses: fp32 inside ----
Tensor softmax(const Tensor& x, int dim = -1);
Tensor log_softmax(const Tensor& x, int dim = -1);

struct CrossEntropyOptions {
  int64_t ignore_index = -100;   ///< targets with this class count neither in loss nor in mean
  double label_smoothing = 0.0;  ///< in [0, 1]
};
/// Mean cross entropy of logits [N, C] (any floating dtype) against class indices [N] (i64).
/// The result is an fp32 scalar (f64 for f64 logits).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options = {});
/// Mean squared error; an fp32 scalar (f64 for f64 inputs).
Tensor mse_loss(const Tensor& prediction, const Tensor& target);

// ---- layout (copies; reshape and slice are views, on Tensor) ----
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, std::vector<int> order);
/// The tensors (same dtype, any dtype; same sizes but along `dim`) joined along `dim`.
Tensor cat(const std::vector<Tensor>& tensors, int dim);
/// Consecutive chunks of `size` along `dim`, the last one smaller when `size` does not divide
/// the dimension; ceil(n / size) copies. Gradients flow back from every chunk that gets one.
std::vector<Tensor> split(const Tensor& x, int64_t size, int dim);
/// Positions [start, start + length) of dimension `dim`, as a copy (slice() is the view along
/// dimension 0).
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);

// ---- lookup and randomness ----
/// Rows of weight [V, D] (any floating dtype) at indices (i64, any shape, values in [0, V)):
/// a [..., D] tensor in weight's dtype. The weight's gradient sums the rows' gradients in
/// fp32, in index order, rounded once. An index out of range throws naming its position.
Tensor embedding(const Tensor& weight, const Tensor& indices);
/// Inverted dropout: element i is kept, scaled by 1 / (1 - p), iff the uniform in [0, 1) from
/// Philox word generator.offset + i is >= p, else zeroed; the generator advances by numel, so
/// the mask depends neither on the thread count nor on how a tensor is split into calls.
/// p in [0, 1). With training false or p == 0 returns x and leaves the generator alone.
Tensor dropout(const Tensor& x, double p, Philox& generator, bool training = true);

// ---- attention ----
/// softmax(q k^T / sqrt(Dh)) v for q, k, v [B, H, T, Dh] of one dtype, query i seeing only
/// keys j <= i when causal; one fused op, fp32 inside (f64 for f64), the result in q's dtype.
/// Keeps q, k, v and one fp32 log-sum-exp per row for backward, not the [T, T] probabilities.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = true);

}  // namespace mixp::ops
