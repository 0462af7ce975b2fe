#include "mixp/nn/embedding.h"

#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

Embedding::Embedding(const EmbeddingOptions& options, Philox& rng) : options_(options) {
  MIXP_CHECK(options.num_embeddings >= 1 && options.embedding_dim >= 1,
             "Embedding: num_embeddings and embedding_dim must be at least 1, got ",
             options.num_embeddings, " and ", options.embedding_dim);
  weight_ = &register_parameter("weight", zeros({options.num_embeddings, options.embedding_dim},
                                                DType::f32, MemoryTag::parameter));
  reset(rng);
}

void Embedding::reset(Philox& rng) { weight_->copy_(randn(weight_->shape(), rng)); }

Tensor Embedding::forward(const Tensor& indices) {
  MIXP_CHECK(indices.defined() && indices.dtype() == DType::i64,
             "Embedding: the indices must be an i64 tensor, got ",
             indices.defined() ? name_of(indices.dtype()) : "an undefined tensor");
  return run_forward_hooks(ops::embedding(*weight_, indices));
}

std::string Embedding::extra_repr() const {
  return detail::concat(options_.num_embeddings, ", ", options_.embedding_dim);
}

}  // namespace mixp::nn
