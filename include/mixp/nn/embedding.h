// mixp/nn/embedding.h — a lookup table of vectors, as torch.nn.Embedding.
//
// Parameter: weight [num_embeddings, embedding_dim], initialized N(0, 1) as PyTorch's.
// (padding_idx, max_norm and sparse gradients are not offered.)
//
// Example:
//
//   mixp::nn::Embedding wte(mixp::nn::EmbeddingOptions(65, 384), rng);
//   mixp::Tensor x = wte.forward(tokens);           // i64 [B, T] -> [B, T, 384]
#pragma once

#include "mixp/nn/module.h"

namespace mixp::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {}
  int64_t num_embeddings;  ///< V, at least 1
  int64_t embedding_dim;   ///< D, at least 1
};

class Embedding : public UnaryModule {
 public:
  /// Draws the initial values from `rng`, which advances. There is no constructor without a
  /// generator: two layers built alike would start equal.
  Embedding(const EmbeddingOptions& options, Philox& rng);

  /// indices i64 of any shape, values in [0, V) -> [..., D] in the weight's dtype.
  Tensor forward(const Tensor& indices) override;
  void reset(Philox& rng);

  const EmbeddingOptions& options() const { return options_; }
  Tensor& weight() { return *weight_; }

 protected:
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

 private:
  EmbeddingOptions options_;
  Tensor* weight_ = nullptr;
};

}  // namespace mixp::nn
