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

// ---- normalization: statistics and math in fp32 (f64 for f64); the result has x's dtype ----
/// (x - mean) / sqrt(var + eps) * weight + bias over the last dimension, with the biased
/// variance of each row. x [..., C]; weight and bias [C], of any floating dtype (their
/// gradients come back in it), or undefined tensors for no scale and no shift.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
/// (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c] per channel c of x [N, C, ...]
/// (NCHW, or [N, C]), the statistics taken over N and the spatial dimensions. weight and bias
/// are [C] or undefined, as for layer_norm. running_mean and running_var are f32 [C], or both
/// undefined when not tracked.
/// training: normalizes with the batch mean and biased variance and, when tracked, updates the
///   running stats in place (not recorded by autograd), as PyTorch does:
///   running = (1 - momentum) running + momentum batch, with the unbiased variance for
///   running_var. Needs more than one value per channel.
/// evaluation (training false): normalizes with the running stats, which must be given.
/// Example: Tensor rm = zeros({16}), rv = ones({16});
///          Tensor y = ops::batch_norm(x, gamma, beta, rm, rv, /*training=*/true);
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                  Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

// ---- layout (copies; reshape and slice are views, on Tensor) ----
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, std::vector<int> order);

}  // namespace mixp::ops
