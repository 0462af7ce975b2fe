// cat: tensors joined along one dimension (a copy).
// Shape contract: tensors is non-empty; all have the same dtype (any dtype) and ndim >= 1, and
// the same size in every dimension but `dim` (negative counts from the end); the result has
// the sum of their sizes along dim.
// Backward: input i gets the slab of g along dim at its own offset.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct CatBackward : autograd::Node {
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;
  int dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    std::vector<Tensor> result(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!next[i].node) continue;
      result[i] = empty(shapes[i], g.dtype(), MemoryTag::activation, g.device());
      detail::copy_along(g, offsets[i], result[i], 0, dim, shapes[i][dim]);
    }
    return result;
  }
};

// make_node for a list of inputs whose length is known only at run time.
std::shared_ptr<CatBackward> make_cat_node(const std::vector<Tensor>& tensors) {
  if (!grad_mode_enabled()) return nullptr;
  bool any = false;
  for (const Tensor& t : tensors) any = any || t.requires_grad();
  if (!any) return nullptr;
  auto node = std::make_shared<CatBackward>();
  node->name = "cat";
  node->next.reserve(tensors.size());
  for (const Tensor& t : tensors) node->next.push_back(autograd::gradient_edge(t));
  return node;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors_in, int dim_in) {
  const auto cast = amp::autocast_inputs(OpKind::cat, tensors_in);
  const std::vector<Tensor>& tensors = cast.tensors();
  MIXP_CHECK(!tensors.empty(), "cat: needs at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i) {
    MIXP_CHECK(tensors[i].defined(), "cat: tensor ", i, " is undefined");
  }
  const Tensor& first = tensors[0];
  MIXP_CHECK(first.ndim() >= 1, "cat: tensors need at least one dimension, got a scalar");
  const int dim = first.shape().normalize_dim(dim_in, "cat");
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MIXP_CHECK(t.dtype() == first.dtype(), "cat: tensor ", i, " has dtype ", name_of(t.dtype()),
               " ", t.shape().to_string(), " but tensor 0 has ", name_of(first.dtype()), " ",
               first.shape().to_string(), "; convert with to(), or use autocast");
    bool same = t.ndim() == first.ndim();
    for (int d = 0; same && d < t.ndim(); ++d) same = d == dim || t.shape()[d] == first.shape()[d];
    MIXP_CHECK(same, "cat: tensor ", i, " has shape ", t.shape().to_string(),
               ", which differs from tensor 0's ", first.shape().to_string(),
               " in a dimension other than ", dim);
    total += t.shape()[dim];
  }
  Shape out_shape = first.shape();
  out_shape[dim] = total;
  Tensor out = empty(out_shape, first.dtype(), MemoryTag::activation, first.device());
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    detail::copy_along(t, 0, out, offset, dim, t.shape()[dim]);
    offsets.push_back(offset);
    offset += t.shape()[dim];
  }
  if (auto node = make_cat_node(tensors)) {
    for (const Tensor& t : tensors) node->shapes.push_back(t.shape());
    node->offsets = offsets;
    node->dim = dim;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
