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
// Example:
//
//   mixp::nn::TransformerBlockOptions o{.n_embd = 384, .n_head = 6};
//   mixp::nn::TransformerBlock block(o, rng, dropout_rng);
//   mixp::Tensor y = block.forward(x);              // [B, T, 384] -> [B, T, 384]
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

class CausalSelfAttention : public UnaryModule {
 public:
  /// dropout_rng: the generator of the dropout masks, shared with the model (required).
  CausalSelfAttention(const TransformerBlockOptions& options, Philox& rng,
                      std::shared_ptr<Philox> dropout_rng);
  /// x [B, T, C] -> [B, T, C]; position t attends to positions <= t.
  Tensor forward(const Tensor& x) override;

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
  MLP(const TransformerBlockOptions& options, Philox& rng,
      std::shared_ptr<Philox> dropout_rng);
  /// x [..., C] -> [..., C].
  Tensor forward(const Tensor& x) override;

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

 protected:
  std::string type_name() const override { return "Block"; }

 private:
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<MLP> mlp_;
};

}  // namespace mixp::nn
