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

// ---- convolution and pooling: NCHW tensors, PyTorch's layouts and output sizes ----
struct Conv2dOptions {
  int64_t stride_h = 1, stride_w = 1;      ///< at least 1
  int64_t pad_h = 0, pad_w = 0;            ///< zeros added on both sides; at least 0
  int64_t dilation_h = 1, dilation_w = 1;  ///< spacing of the kernel taps; at least 1
  int64_t groups = 1;                      ///< divides C and O; groups == C is depthwise
  std::optional<DType> out_dtype;          ///< the result's dtype; x's unless given
};
/// x [N, C, H, W] convolved with weight [O, C / groups, kh, kw] (cross-correlation, as in
/// PyTorch), plus bias [O] if defined; x and weight share a dtype, bias may have any floating
/// dtype. The result is [N, O, OH, OW] with OH = floor((H + 2 pad_h - dilation_h (kh - 1) - 1)
/// / stride_h) + 1, and OW likewise. Accumulates in fp32 (f64 for f64), adds the bias in fp32
/// and rounds once. The gradients have the dtypes of x, weight and bias.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Conv2dOptions options = {});

/// The maximum over kernel_h x kernel_w windows of x [N, C, H, W], every stride_h rows and
/// stride_w columns (a stride of 0, the default, means the kernel's size, as PyTorch's
/// stride=None), with pad_h / pad_w rows and columns of -inf on both sides (at most half the
/// kernel). The result is [N, C, OH, OW], OH = floor((H + 2 pad_h - kernel_h) / stride_h) + 1,
/// in x's dtype. The gradient goes to the first maximum of each window (row-major); a NaN
/// counts as the maximum.
Tensor max_pool2d(const Tensor& x, int64_t kernel_h, int64_t kernel_w, int64_t stride_h = 0,
                  int64_t stride_w = 0, int64_t pad_h = 0, int64_t pad_w = 0);
/// The mean over windows as in max_pool2d, with zero padding that counts in the divisor
/// (PyTorch's count_include_pad=true): every window divides by kernel_h * kernel_w. fp32
/// compute; the result has x's dtype.
Tensor avg_pool2d(const Tensor& x, int64_t kernel_h, int64_t kernel_w, int64_t stride_h = 0,
                  int64_t stride_w = 0, int64_t pad_h = 0, int64_t pad_w = 0);
/// The mean of x [N, C, H, W] over the windows that make an [N, C, out_h, out_w] result:
/// output row i averages rows floor(i H / out_h) to ceil((i + 1) H / out_h) - 1, as in
/// PyTorch, columns likewise. out_h and out_w may exceed H and W. fp32 compute; x's dtype.
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);

// ---- normalization: statistics and math in fp32 (f64 for f64); the result has x's dtype ----
/// (x - mean) / sqrt(var + eps) * weight + bias over the last dimension, with the biased
/// variance of each row. x [..., C]; weight and bias [C], of any floating dtype (their
/// gradients come back in it), or undefined tensors for no scale and no shift. out_dtype: the
/// result's dtype, x's by default; an f32 x may give bf16 or f16 directly, the fp32 result
/// rounded once, as layer_norm(...).to(out_dtype) gives it but without the fp32 copy (its
/// gradient then arrives in out_dtype and is read as it is).
///   Tensor h = ops::layer_norm(x, w, b, 1e-5, DType::bf16);  // the input of a bf16 linear
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  std::optional<DType> out_dtype = std::nullopt);
/// What add_layer_norm returns: the sum and its layer norm.
struct SumAndNorm {
  Tensor sum, normalized;
};
/// sum = add(a, b) and normalized = layer_norm(sum, weight, bias, eps, out_dtype): the same
/// values and gradients, bit for bit, as the two ops, in one pass over the rows each way where
/// the sum is fp32 (a and b fp32, or under autocast one fp32 and one bf16 or f16 of one shape):
/// a transformer's residual add and the layer norm that reads it. Backward then adds the
/// gradients of the two results in the same pass and rounds the sum's gradient once for a
/// narrow input.
///   auto [h, hn] = ops::add_layer_norm(x, attn_out, ln_w, ln_b, 1e-5, DType::bf16);
SumAndNorm add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& weight,
                          const Tensor& bias, double eps = 1e-5,
                          std::optional<DType> out_dtype = std::nullopt);
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
/// relu(batch_norm(...)) with the same arguments, results and gradients, bit for bit, in fewer
/// passes over the data: the ReLU is applied to the normalized values before their rounding,
/// and its backward inside batch_norm's. The pair nn::Sequential fuses (BatchNorm2d, ReLU).
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       Tensor& running_mean, Tensor& running_var, bool training,
                       double momentum = 0.1, double eps = 1e-5);
/// max_pool2d(batch_norm_relu(...), 2, 2) for x [N, C, H, W] with H, W >= 2: the same
/// arguments, results and gradients, bit for bit, without the full-size output. The forward
/// normalizes, cuts and pools in one pass after the statistics and keeps a one-byte window place
/// per output for backward, instead of a 64-bit index; the backward sends the gradient to the
/// window's winner and runs batch_norm's backward. The triple nn::Sequential fuses
/// (BatchNorm2d, ReLU, MaxPool2d(2)) on bf16 and f16 inputs.
Tensor batch_norm_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  Tensor& running_mean, Tensor& running_var, bool training,
                                  double momentum = 0.1, double eps = 1e-5);

// ---- layout (copies; reshape and slice are views, on Tensor) ----
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, std::vector<int> order);
/// The tensors (same dtype, any dtype; same sizes but along `dim`) joined along `dim`.
Tensor cat(const std::vector<Tensor>& tensors, int dim);
/// Consecutive chunks of `size` along `dim`, the last one smaller when `size` does not divide
/// the dimension; ceil(n / size) copies. Gradients flow back from every chunk that gets one.
std::vector<Tensor> split(const Tensor& x, int64_t size, int dim);
/// Multi-head attention's q, k and v from a packed projection qkv [B, T, 3C], each [B, heads,
/// T, C / heads]: split(qkv, C, 2), then each part reshaped to [B, T, heads, Dh] and permuted
/// {0, 2, 1, 3}, in one pass (and one pass back in backward).
///   auto qkv = ops::split_heads(c_attn(x), n_head);  // qkv[0] is q, [B, H, T, Dh]
std::vector<Tensor> split_heads(const Tensor& qkv, int64_t heads);
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
/// Multi-head attention on a packed projection: qkv [B, T, 3C] -> [B, T, C], the heads'
/// results side by side. The same values as split_heads(qkv, heads), then
/// scaled_dot_product_attention, then permute {0, 2, 1, 3} and reshape [B, T, C]; where the
/// tiled bf16 attention runs (bf16 after autocast, AVX-512 BF16, C / heads a multiple of 16),
/// it reads q, k and v in place and writes the heads into place, in backward too, without the
/// copies of the split and the merge. Autocast: scaled_dot_product_attention's policy.
///   Tensor y = ops::multi_head_attention(c_attn(x), n_head);  // [B, T, C]
Tensor multi_head_attention(const Tensor& qkv, int64_t heads, bool causal = true);

}  // namespace mixp::ops
