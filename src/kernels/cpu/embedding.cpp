// The CPU candidates of kernels/embedding.h: rows split over the threads, and the fallbacks, one
// thread (the backward accumulating in double).
#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "mixp/error.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

template <bool Parallel>
void gather_rows(const Tensor& weight, const Tensor& indices, Tensor& out) {
  const size_t row = size_t(weight.size(1)) * size_t(size_of(weight.dtype()));
  if (row == 0) return;
  const int64_t* idx = indices.data<int64_t>();
  const char* src = static_cast<const char*>(weight.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  auto copy = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      std::memcpy(dst + size_t(p) * row, src + size_t(idx[p]) * row, row);
  };
  if constexpr (Parallel) {
    parallel_for(indices.numel(), std::max<int64_t>(1, int64_t(65536 / row)), copy);
  } else {
    copy(0, indices.numel());
  }
}

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

// Rows of dweight in parallel, each summed over its positions in order in fp32.
template <typename T>
void scatter_add_rows(const T* g, const int64_t* idx, int64_t n, int64_t rows, int64_t d, T* dw) {
  using C = Compute<T>;
  const RowIndex r = group_by_row(idx, n, rows);
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(d, 1)),
               [&](int64_t begin, int64_t end) {
                 std::vector<C> acc(static_cast<size_t>(d)), row(static_cast<size_t>(d));
                 for (int64_t v = begin; v < end; ++v) {
                   std::fill(acc.begin(), acc.end(), C(0));
                   for (int64_t q = r.start[size_t(v)]; q < r.start[size_t(v + 1)]; ++q) {
                     widen(g + r.order[size_t(q)] * d, d, row.data());
                     for (int64_t j = 0; j < d; ++j) acc[size_t(j)] += row[size_t(j)];
                   }
                   narrow(acc.data(), d, dw + v * d);
                 }
               });
}

// One pass over the positions in order, in double, rounded once at the end.
template <typename T>
void scatter_add_positions(const T* g, const int64_t* idx, int64_t n, int64_t rows, int64_t d,
                           T* dw) {
  std::vector<double> acc(static_cast<size_t>(rows * d), 0.0);
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t j = 0; j < d; ++j) acc[size_t(idx[p] * d + j)] += to_double(g[p * d + j]);
  }
  for (int64_t i = 0; i < rows * d; ++i) dw[i] = from_double<T>(acc[size_t(i)]);
}

template <bool Fallback>
void scatter_add_cpu(const Tensor& g, const Tensor& indices, Tensor& dweight) {
  const int64_t rows = dweight.size(0), d = dweight.size(1), n = indices.numel();
  visit_floating(dweight.dtype(), "embedding", [&]<typename T>() {
    if constexpr (Fallback) {
      scatter_add_positions(g.data<T>(), indices.data<int64_t>(), n, rows, d, dweight.data<T>());
    } else {
      scatter_add_rows(g.data<T>(), indices.data<int64_t>(), n, rows, d, dweight.data<T>());
    }
  });
}

void check_indices_cpu(const Tensor& indices, const Tensor& weight) {
  const int64_t rows = weight.size(0);
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t p = 0; p < indices.numel(); ++p) {
    MIXP_CHECK(idx[p] >= 0 && idx[p] < rows, "embedding: index ", idx[p], " at position ", p,
               " of indices ", indices.shape().to_string(), " is out of range for a table of ",
               rows, " rows (weight ", weight.shape().to_string(), ")");
  }
}

}  // namespace

Kernel<EmbeddingCheckIndicesFn> embedding_check_indices(
    "embedding_check_indices", {{.name = "scalar", .fn = check_indices_cpu, .fallback = true}});

Kernel<EmbeddingGatherFn> embedding_gather(
    "embedding_gather", {{.name = "openmp", .fn = gather_rows<true>},
                         {.name = "scalar", .fn = gather_rows<false>, .fallback = true}});

Kernel<EmbeddingScatterAddFn> embedding_scatter_add(
    "embedding_scatter_add", {{.name = "openmp", .fn = scatter_add_cpu<false>},
                              {.name = "scalar", .fn = scatter_add_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
