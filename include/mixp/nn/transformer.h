// mixp/nn/transformer.h — the blocks of a GPT in nanoGPT's layout and names.
//
//   CausalSelfAttention   c_attn: Linear(C, 3C), c_proj: Linear(C, C). q, k, v = the three
//                         C-wide parts of c_attn(x), split into n_head heads; causal scaled
//                         dot-product attention (one fused op); the heads joined; c_proj; then
//                         dropout (nanoGPT's resid_dropout; the fused op has no attention
//                         dropout, so nanoGPT's attn_dropout is not applied).
//   MLP                   c_fc: Linear(C, 4C), GELU (tanh form, GPT-2's), c_proj: Linear(4C, C),
//                         dropout.
//   TransformerBlock      pre-norm: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
//
// Parameter names of a block: ln_1.{weight,bias}, attn.c_attn.{weight,bias},
// attn.c_proj.{weight,bias}, ln_2.{weight,bias}, mlp.c_fc.{weight,bias}, mlp.c_proj.{weight,bias}.
// The layers start with PyTorch's default initialization; the gpt model (mixp/nn/models.h)
// then applies GPT-2's.
//
// Decoding with a key/value cache (forward_cached): a block reads new positions after those it
// has read before, and attention from them reaches the cached keys and values of the earlier
// ones, so that a new token costs one position rather than the whole sequence. No dropout is
// applied and nothing is recorded for backward. The attention over the cache is composed from
// ops with the numerics of the fused scaled_dot_product_attention (mixp/ops.h): scores q k^T
// accumulated in fp32 from q's dtype, scaled by 1/sqrt(Dh), the softmax in fp32, the
// probabilities rounded once to bf16 for bf16 inputs (kept fp32 otherwise, with v widened), the
// product with v accumulated in fp32 and rounded once to q's dtype. Only the order of the sums
// differs from forward(), so the two agree to within rounding. One difference: under an FP8
// recipe (amp::Fp8Autocast) forward() runs the attention's products in FP8, while the cached
// attention runs them in q's dtype (bf16 under the fp8 presets); the Linear layers are FP8 in
// both.
//
// Example:
//
//   mixp::nn::TransformerBlockOptions o{.n_embd = 384, .n_head = 6};
//   mixp::nn::TransformerBlock block(o, rng, dropout_rng);
//   mixp::Tensor y = block.forward(x);              // [B, T, 384] -> [B, T, 384]
//
//   mixp::nn::KVCache cache(/*capacity=*/256);
//   mixp::Tensor a = block.forward_cached(x.slice(0, 1), cache);  // the first positions ...
//   mixp::Tensor b = block.forward_cached(next, cache);          // ... then [1, 1, 384] more
#pragma once

#include <memory>

#include "mixp/nn/dropout.h"
#include "mixp/nn/layer_norm.h"
#include "mixp/nn/linear.h"

namespace mixp::nn {

struct TransformerBlockOptions {
  int64_t n_embd = 768;  ///< C, divisible by n_head
  int64_t n_head = 12;
  bool bias = true;      ///< biases in the Linear layers and LayerNorms (nanoGPT's default)
  double dropout = 0.0;  ///< in [0, 1)
  double layer_norm_eps = 1e-5;
};

/// The keys and values one CausalSelfAttention has computed for the positions it has read, up
/// to `capacity` positions, in the dtype of its projections. Filled by forward_cached.
class KVCache {
 public:
  explicit KVCache(int64_t capacity);
  /// Positions held.
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  /// Forgets every position; the storage is kept for the next ones.
  void clear() { length_ = 0; }

 private:
  friend class CausalSelfAttention;
  // Appends k and v [B, H, T, Dh] (the split heads of the new positions).
  void append(const Tensor& k, const Tensor& v);

  int64_t capacity_;
  int64_t length_ = 0;
  Tensor keys_t_;  // [B, H, Dh, capacity]: transposed, so q k^T reads it as it is
  Tensor values_;  // [B, H, capacity, Dh]
};

class CausalSelfAttention : public UnaryModule {
 public:
  /// dropout_rng: the generator of the dropout masks, shared with the model (required).
  CausalSelfAttention(const TransformerBlockOptions& options, Philox& rng,
                      std::shared_ptr<Philox> dropout_rng);
  /// x [B, T, C] -> [B, T, C]; position t attends to positions <= t.
  Tensor forward(const Tensor& x) override;
  /// x [B, T, C]: positions cache.length() ... + T - 1, after those the cache holds (which
  /// must be of the same B). Their keys and values join the cache; each attends to every
  /// cached position and to the new ones up to itself. Throws mixp::Error when the cache
  /// would exceed its capacity. See the top of this file for the numerics.
  Tensor forward_cached(const Tensor& x, KVCache& cache);

  Linear& c_attn() { return *c_attn_; }
  Linear& c_proj() { return *c_proj_; }

 protected:
  std::string type_name() const override { return "CausalSelfAttention"; }

 private:
  TransformerBlockOptions options_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
  std::shared_ptr<Dropout> resid_dropout_;
};

class MLP : public UnaryModule {
 public:
  MLP(const TransformerBlockOptions& options, Philox& rng, std::shared_ptr<Philox> dropout_rng);
  /// x [..., C] -> [..., C].
  Tensor forward(const Tensor& x) override;
  /// forward() as in evaluation mode, whatever the mode: no dropout.
  Tensor forward_without_dropout(const Tensor& x);

  Linear& c_fc() { return *c_fc_; }
  Linear& c_proj() { return *c_proj_; }

 protected:
  std::string type_name() const override { return "MLP"; }

 private:
  std::shared_ptr<Linear> c_fc_, c_proj_;
  std::shared_ptr<Dropout> dropout_;
};

class TransformerBlock : public UnaryModule {
 public:
  TransformerBlock(const TransformerBlockOptions& options, Philox& rng,
                   std::shared_ptr<Philox> dropout_rng);
  /// x [B, T, C] -> [B, T, C].
  Tensor forward(const Tensor& x) override;
  /// forward() of new positions after those `cache` holds (CausalSelfAttention::forward_cached),
  /// without dropout.
  Tensor forward_cached(const Tensor& x, KVCache& cache);
  /// forward() with each residual add fused with the layer norm that reads its sum
  /// (LayerNorm::add_forward_for_linear): ln_2 after the first, and `next_norm` (the next
  /// block's ln_1, or the model's final layer norm) after the last. Takes x and
  /// ln_1().forward_for_linear(x); returns the block's result and next_norm's of it, the same
  /// values and gradients as forward() then next_norm.forward_for_linear().
  ///   ops::SumAndNorm s{.sum = x, .normalized = b0.ln_1().forward_for_linear(x)};
  ///   s = b0.forward_fused(s.sum, s.normalized, b1.ln_1());
  ops::SumAndNorm forward_fused(const Tensor& x, const Tensor& x_normalized, LayerNorm& next_norm);
  LayerNorm& ln_1() { return *ln_1_; }

 protected:
  std::string type_name() const override { return "Block"; }

 private:
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace mixp::nn
