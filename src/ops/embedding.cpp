// embedding: rows of a table picked by index.
// Shape contract: weight [V, D] (f32, f64, f16 or bf16); indices i64 of any shape, every value
// in [0, V); the result is [..., D] (indices' shape, then D) in weight's dtype.
// Backward: dweight[v] = sum of g[p] over the positions p with indices[p] == v, summed in index
// order in fp32 (f64 for f64) and rounded once to weight's dtype; the indices get no gradient.
#include "kernels/embedding.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct EmbeddingBackward : autograd::Node {
  autograd::SavedTensor indices;
  Shape weight_shape;
  DType weight_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor idx = indices.get();
    const Tensor g = grads[0].to(weight_dtype).detach();
    Tensor dw = empty(weight_shape, weight_dtype, MemoryTag::gradient, g.device());
    kernels::embedding_scatter_add(g, idx, dw);
    return {dw};
  }
  void release() override { indices.reset(); }
};

}  // namespace

Tensor embedding(const Tensor& weight_in, const Tensor& indices_in) {
  const auto cast = amp::autocast_inputs(OpKind::embedding, {&weight_in, &indices_in});
  const Tensor &weight = cast[0], &indices = cast[1];
  detail::check_floating("embedding", weight, "weight");
  MIXP_CHECK(weight.ndim() == 2, "embedding: weight must be [V, D], got ",
             weight.shape().to_string());
  MIXP_CHECK(indices.defined(), "embedding: the indices are undefined");
  MIXP_CHECK(indices.dtype() == DType::i64, "embedding: indices must be i64, got ",
             name_of(indices.dtype()), " ", indices.shape().to_string());
  MIXP_CHECK(indices.ndim() < kMaxDims, "embedding: indices ", indices.shape().to_string(),
             " have too many dimensions for a [..., D] result (at most ", kMaxDims - 1, ")");
  const int64_t d = weight.shape()[1];
  kernels::embedding_check_indices(indices, weight);
  std::vector<int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
  dims.push_back(d);
  Tensor out = empty(Shape(dims), weight.dtype(), MemoryTag::activation, weight.device());
  kernels::embedding_gather(weight, indices, out);
  if (auto node = autograd::make_node<EmbeddingBackward>("embedding", {&weight})) {
    node->indices = autograd::SavedTensor(indices);
    node->weight_shape = weight.shape();
    node->weight_dtype = weight.dtype();
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
