#include "mixp/nn/transformer.h"

#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {
namespace {

void check_options(const TransformerBlockOptions& o) {
  MIXP_CHECK(o.n_embd >= 1 && o.n_head >= 1 && o.n_embd % o.n_head == 0,
             "TransformerBlock: n_embd (", o.n_embd, ") must be a positive multiple of n_head (",
             o.n_head, ")");
  MIXP_CHECK(o.dropout >= 0 && o.dropout < 1, "TransformerBlock: dropout must be in [0, 1), got ",
             o.dropout);
}

LayerNormOptions ln_options(const TransformerBlockOptions& o) {
  LayerNormOptions l(o.n_embd);
  l.eps = o.layer_norm_eps;
  l.bias = o.bias;
  return l;
}

void check_input(const char* what, const Tensor& x, int64_t c) {
  MIXP_CHECK(x.defined() && x.ndim() == 3 && x.size(2) == c, what, ": expected an input [B, T, ", c,
             "], got ", x.defined() ? x.shape().to_string() : "an undefined tensor");
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(const TransformerBlockOptions& options, Philox& rng,
                                         std::shared_ptr<Philox> dropout_rng)
    : options_(options) {
  check_options(options);
  const int64_t c = options.n_embd;
  c_attn_ = register_module("c_attn",
                            std::make_shared<Linear>(LinearOptions(c, 3 * c, options.bias), rng));
  c_proj_ =
      register_module("c_proj", std::make_shared<Linear>(LinearOptions(c, c, options.bias), rng));
  resid_dropout_ = register_module(
      "resid_dropout",
      std::make_shared<Dropout>(DropoutOptions(options.dropout), std::move(dropout_rng)));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  const int64_t c = options_.n_embd, heads = options_.n_head;
  check_input("CausalSelfAttention", x, c);
  const Tensor heads_merged =
      ops::multi_head_attention(c_attn_->forward(x), heads, /*causal=*/true);  // [B, T, C]
  return resid_dropout_->forward(c_proj_->forward(heads_merged));
}

MLP::MLP(const TransformerBlockOptions& options, Philox& rng, std::shared_ptr<Philox> dropout_rng) {
  check_options(options);
  const int64_t c = options.n_embd;
  c_fc_ =
      register_module("c_fc", std::make_shared<Linear>(LinearOptions(c, 4 * c, options.bias), rng));
  c_proj_ = register_module("c_proj",
                            std::make_shared<Linear>(LinearOptions(4 * c, c, options.bias), rng));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(DropoutOptions(options.dropout),
                                                                  std::move(dropout_rng)));
}

Tensor MLP::forward(const Tensor& x) {
  return dropout_->forward(c_proj_->forward(ops::gelu_tanh(c_fc_->forward(x))));
}

TransformerBlock::TransformerBlock(const TransformerBlockOptions& options, Philox& rng,
                                   std::shared_ptr<Philox> dropout_rng) {
  check_options(options);
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(ln_options(options)));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(options, rng, dropout_rng));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(ln_options(options)));
  mlp_ = register_module("mlp", std::make_shared<MLP>(options, rng, dropout_rng));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  const Tensor h = ops::add(x, attn_->forward(ln_1_->forward_for_linear(x)));
  return ops::add(h, mlp_->forward(ln_2_->forward_for_linear(h)));
}

}  // namespace mixp::nn
