#include "mixp/nn/transformer.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "mixp/amp/autocast.h"
#include "mixp/autograd.h"
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

// Copies src [B, H, T, Dh] into dst at position `at` of its positions: dst [B, H, Dh, capacity]
// (transposed) or [B, H, capacity, Dh]. Element bytes are moved as they are.
template <typename Word>
void copy_positions(const Tensor& src, Tensor& dst, int64_t at, bool transposed) {
  const int64_t bh = src.size(0) * src.size(1), t = src.size(2), dh = src.size(3);
  const int64_t capacity = transposed ? dst.size(3) : dst.size(2);
  const Word* in = static_cast<const Word*>(src.raw_data());
  Word* out = static_cast<Word*>(dst.raw_data());
  for (int64_t m = 0; m < bh; ++m) {
    for (int64_t i = 0; i < t; ++i) {
      const Word* row = in + (m * t + i) * dh;
      if (transposed) {
        for (int64_t d = 0; d < dh; ++d) out[(m * dh + d) * capacity + at + i] = row[d];
      } else {
        std::memcpy(out + (m * capacity + at + i) * dh, row, size_t(dh) * sizeof(Word));
      }
    }
  }
}

void copy_positions(const Tensor& src, Tensor& dst, int64_t at, bool transposed) {
  switch (size_of(src.dtype())) {
    case 2: return copy_positions<uint16_t>(src, dst, at, transposed);
    case 4: return copy_positions<uint32_t>(src, dst, at, transposed);
    case 8: return copy_positions<uint64_t>(src, dst, at, transposed);
    default: MIXP_ASSERT(false, "KVCache: no copy for dtype ", name_of(src.dtype()));
  }
}

// 0 where new position i (absolute past + i) may see key j, -inf where j is later or not yet
// written: [T, capacity].
Tensor causal_mask(int64_t past, int64_t t, int64_t capacity) {
  Tensor mask = zeros({t, capacity}, DType::f32);
  float* m = mask.data<float>();
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = past + i + 1; j < capacity; ++j)
      m[i * capacity + j] = -std::numeric_limits<float>::infinity();
  return mask;
}

// softmax(q k^T / sqrt(Dh) + mask) v for q [B, H, T, Dh], keys_t [B, H, Dh, S], v [B, H, S, Dh],
// with the numerics of ops::scaled_dot_product_attention (see the header). The whole capacity S
// is read, the positions not yet written masked out (their zeros add exact zeros), so that the
// products keep one shape from token to token and oneDNN reuses their primitives.
Tensor attend(const Tensor& q, const Tensor& keys_t, const Tensor& v, int64_t past) {
  const DType dtype = q.dtype();
  Tensor scores = ops::matmul(q, keys_t, DType::f32);
  scores = ops::mul_scalar(scores, 1.0 / std::sqrt(double(q.size(3))));
  scores = ops::add(scores, causal_mask(past, q.size(2), keys_t.size(3)));
  const Tensor p = ops::softmax(scores, -1);
  if (dtype == DType::bf16) return ops::matmul(p.to(DType::bf16), v, DType::bf16);
  const Tensor y = ops::matmul(p, v.dtype() == DType::f32 ? v : v.to(DType::f32), DType::f32);
  return y.dtype() == dtype ? y : y.to(dtype);
}

}  // namespace

KVCache::KVCache(int64_t capacity) : capacity_(capacity) {
  MIXP_CHECK(capacity >= 1, "KVCache: the capacity must be at least 1, got ", capacity);
}

void KVCache::append(const Tensor& k, const Tensor& v) {
  const int64_t b = k.size(0), h = k.size(1), t = k.size(2), dh = k.size(3);
  MIXP_CHECK(length_ + t <= capacity_, "KVCache: ", t, " new positions after ", length_,
             " exceed the capacity of ", capacity_);
  const bool fits = keys_t_.defined() && keys_t_.dtype() == k.dtype() && keys_t_.size(0) == b &&
                    keys_t_.size(1) == h && keys_t_.size(2) == dh;
  if (!fits) {
    MIXP_CHECK(length_ == 0, "KVCache: new positions of shape ", k.shape().to_string(), " ",
               name_of(k.dtype()), " after ", length_, " of another batch, width or dtype");
    // Zeros: the positions not yet written are read (masked) by the attention, and a product
    // with garbage there could be NaN even with a probability of 0.
    keys_t_ = zeros({b, h, dh, capacity_}, k.dtype());
    values_ = zeros({b, h, capacity_, dh}, k.dtype());
  }
  copy_positions(k, keys_t_, length_, /*transposed=*/true);
  copy_positions(v, values_, length_, /*transposed=*/false);
  length_ += t;
}

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

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache& cache) {
  const int64_t c = options_.n_embd;
  check_input("CausalSelfAttention", x, c);
  NoGradGuard no_grad;
  const std::vector<Tensor> qkv = ops::split_heads(c_attn_->forward(x), options_.n_head);
  const int64_t past = cache.length();
  cache.append(qkv[1], qkv[2]);
  Tensor y;
  {
    // The attention's dtypes are set here, as the fused op sets them inside its body.
    amp::Autocast off(DType::bf16, /*enabled=*/false);
    y = attend(qkv[0], cache.keys_t_, cache.values_, past);
  }
  return c_proj_->forward(ops::permute(y, {0, 2, 1, 3}).reshape({x.size(0), x.size(1), c}));
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

Tensor MLP::forward(const Tensor& x) { return dropout_->forward(forward_without_dropout(x)); }

Tensor MLP::forward_without_dropout(const Tensor& x) {
  return c_proj_->forward(ops::gelu_tanh(c_fc_->forward(x)));
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

ops::SumAndNorm TransformerBlock::forward_fused(const Tensor& x, const Tensor& x_normalized,
                                                LayerNorm& next_norm) {
  const ops::SumAndNorm h = ln_2_->add_forward_for_linear(x, attn_->forward(x_normalized));
  return next_norm.add_forward_for_linear(h.sum, mlp_->forward(h.normalized));
}

Tensor TransformerBlock::forward_cached(const Tensor& x, KVCache& cache) {
  NoGradGuard no_grad;
  const Tensor h = ops::add(x, attn_->forward_cached(ln_1_->forward_for_linear(x), cache));
  return ops::add(h, mlp_->forward_without_dropout(ln_2_->forward_for_linear(h)));
}

}  // namespace mixp::nn
