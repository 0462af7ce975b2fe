// embedding: rows of a table picked by index.
// Shape contract: weight [V, D] (f32, f64, f16 or bf16); indices i64 of any shape, every value
// in [0, V); the result is [..., D] (indices' shape, then D) in weight's dtype.
// Backward: dweight[v] = sum of g[p] over the positions p with indices[p] == v, summed in index
// order in fp32 (f64 for f64) and rounded once to weight's dtype; the indices get no gradient.
#include <algorithm>
#include <cstring>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

// Positions grouped by the row they read, each group in increasing position order: row v's
// positions are order[start[v]] ... order[start[v + 1] - 1].
struct RowIndex {
  std::vector<int64_t> start, order;
};

RowIndex group_by_row(const int64_t* idx, int64_t n, int64_t rows) {
  RowIndex r;
  r.start.assign(static_cast<size_t>(rows + 1), 0);
  for (int64_t p = 0; p < n; ++p) ++r.start[size_t(idx[p] + 1)];
  for (int64_t v = 0; v < rows; ++v) r.start[size_t(v + 1)] += r.start[size_t(v)];
  r.order.resize(static_cast<size_t>(n));
  std::vector<int64_t> next(r.start.begin(), r.start.end() - 1);
  for (int64_t p = 0; p < n; ++p) r.order[size_t(next[size_t(idx[p])]++)] = p;
  return r;
}

// Fast: rows of dweight in parallel, each summed over its positions in order in fp32.
template <typename T>
void scatter_add_fast(const T* g, const int64_t* idx, int64_t n, int64_t rows, int64_t d, T* dw) {
  using C = kernels::Compute<T>;
  const RowIndex r = group_by_row(idx, n, rows);
  kernels::parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(d, 1)),
                        [&](int64_t begin, int64_t end) {
                          std::vector<C> acc(static_cast<size_t>(d)), row(static_cast<size_t>(d));
                          for (int64_t v = begin; v < end; ++v) {
                            std::fill(acc.begin(), acc.end(), C(0));
                            for (int64_t q = r.start[size_t(v)]; q < r.start[size_t(v + 1)]; ++q) {
                              kernels::widen(g + r.order[size_t(q)] * d, d, row.data());
                              for (int64_t j = 0; j < d; ++j) acc[size_t(j)] += row[size_t(j)];
                            }
                            kernels::narrow(acc.data(), d, dw + v * d);
                          }
                        });
}

// Reference: one pass over the positions in order, in double, rounded once at the end.
template <typename T>
void scatter_add_reference(const T* g, const int64_t* idx, int64_t n, int64_t rows, int64_t d,
                           T* dw) {
  std::vector<double> acc(static_cast<size_t>(rows * d), 0.0);
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t j = 0; j < d; ++j) acc[size_t(idx[p] * d + j)] += kernels::to_double(g[p * d + j]);
  }
  for (int64_t i = 0; i < rows * d; ++i) dw[i] = kernels::from_double<T>(acc[size_t(i)]);
}

struct EmbeddingBackward : autograd::Node {
  autograd::SavedTensor indices;
  Shape weight_shape;
  DType weight_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor idx = indices.get();
    const Tensor g = grads[0].to(weight_dtype).detach();
    Tensor dw = empty(weight_shape, weight_dtype);
    const int64_t rows = weight_shape[0], d = weight_shape[1], n = idx.numel();
    visit_floating(weight_dtype, name, [&]<typename T>() {
      if (reference_mode()) {
        scatter_add_reference(g.data<T>(), idx.data<int64_t>(), n, rows, d, dw.data<T>());
      } else {
        scatter_add_fast(g.data<T>(), idx.data<int64_t>(), n, rows, d, dw.data<T>());
      }
    });
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
  const int64_t rows = weight.shape()[0], d = weight.shape()[1], n = indices.numel();
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t p = 0; p < n; ++p) {
    MIXP_CHECK(idx[p] >= 0 && idx[p] < rows, "embedding: index ", idx[p], " at position ", p,
               " of indices ", indices.shape().to_string(), " is out of range for a table of ",
               rows, " rows (weight ", weight.shape().to_string(), ")");
  }
  std::vector<int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
  dims.push_back(d);
  Tensor out = empty(Shape(dims), weight.dtype());
  const size_t row = size_t(d) * size_t(size_of(weight.dtype()));
  const char* src = static_cast<const char*>(weight.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  if (row > 0) {
    kernels::parallel_for(n, std::max<int64_t>(1, int64_t(65536 / row)),
                          [&](int64_t begin, int64_t end) {
                            for (int64_t p = begin; p < end; ++p) {
                              std::memcpy(dst + size_t(p) * row, src + size_t(idx[p]) * row, row);
                            }
                          });
  }
  if (auto node = autograd::make_node<EmbeddingBackward>("embedding", {&weight})) {
    node->indices = autograd::SavedTensor(indices);
    node->weight_shape = weight.shape();
    node->weight_dtype = weight.dtype();
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
