// The CPU candidates of kernels/sum.h: two for a few long lines, which split each line over
// the threads; one that splits the lines over the threads; and the fallback, one thread
// accumulating in double. Each adds in an order fixed by the shape, so the fp32 ones give the
// same bits whatever the thread count.
#include "kernels/sum.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "kernels/elementwise.h"

namespace mixp::kernels {
namespace {

// Below this many values per line, splitting one line over the threads does not pay.
constexpr int64_t kSplitLine = 4 * kBlock * 16;

bool few_long_rows(const Tensor&, const Lines& a, const double&, const Tensor&) {
  return a.inner == 1 && a.outer < 4 && a.n > kSplitLine;
}

bool few_wide_slices(const Tensor&, const Lines& a, const double&, const Tensor&) {
  return a.inner > 1 && a.outer < 4 && a.n * a.inner > kSplitLine;
}

// Fixed chunks of each row in parallel, partials added in chunk order: the result does not
// depend on the thread count.
void sum_long_rows(const Tensor& x, Lines a, double scale, Tensor& out) {
  visit_floating(x.dtype(), "sum", [&]<typename T>() {
    using Acc = Compute<T>;
    constexpr int64_t kChunk = 16 * kBlock;
    for (int64_t o = 0; o < a.outer; ++o) {
      const T* row = x.data<T>() + o * a.n;
      const int64_t chunks = (a.n + kChunk - 1) / kChunk;
      std::vector<Acc> partial(static_cast<size_t>(chunks));
      parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          partial[size_t(c)] =
              blocked_sum<Acc>(row + c * kChunk, std::min(kChunk, a.n - c * kChunk));
        }
      });
      Acc total = 0;
      for (Acc p : partial) total += p;
      out.data<T>()[o] = from_double<T>(double(total * Acc(scale)));
    }
  });
}

// A few slices of many columns (a bias gradient: [1, rows, features]): blocks of columns in
// parallel, each column summed over the rows in order, as sum_lines_of does: the same bits.
// About four blocks, at least 64 columns each: long rows stream better than short ones
// (256-column blocks were 45% slower on a [4096, 1536] bf16 gradient than 384).
void sum_wide_slices(const Tensor& x, Lines a, double scale, Tensor& out) {
  visit_floating(x.dtype(), "sum", [&]<typename T>() {
    using Acc = Compute<T>;
    const T* in = x.data<T>();
    T* y = out.data<T>();
    const int64_t columns = std::max<int64_t>(64, (a.inner / 4 + 15) / 16 * 16);
    for (int64_t o = 0; o < a.outer; ++o) {
      parallel_for(a.inner, columns, [&](int64_t begin, int64_t end) {
        std::vector<Acc> acc(static_cast<size_t>(end - begin), Acc(0));
        for (int64_t k = 0; k < a.n; ++k) {
          accumulate_row(in + (o * a.n + k) * a.inner + begin, acc.data(), end - begin);
        }
        for (int64_t i = begin; i < end; ++i) {
          y[o * a.inner + i] = from_double<T>(double(acc[size_t(i - begin)] * Acc(scale)));
        }
      });
    }
  });
}

template <typename T, typename Acc>
void sum_line(const T* in, Lines a, double scale, int64_t o, T* out) {
  if (a.inner == 1) {
    out[o] = from_double<T>(double(blocked_sum<Acc>(in + o * a.n, a.n) * Acc(scale)));
    return;
  }
  std::vector<Acc> acc(static_cast<size_t>(a.inner), Acc(0));
  for (int64_t k = 0; k < a.n; ++k)
    accumulate_row(in + (o * a.n + k) * a.inner, acc.data(), a.inner);
  for (int64_t i = 0; i < a.inner; ++i) {
    out[o * a.inner + i] = from_double<T>(double(acc[size_t(i)] * Acc(scale)));
  }
}

template <bool Fallback>
void sum_lines_of(const Tensor& x, Lines a, double scale, Tensor& out) {
  visit_floating(x.dtype(), "sum", [&]<typename T>() {
    using Acc = std::conditional_t<Fallback, double, Compute<T>>;
    const T* in = x.data<T>();
    T* y = out.data<T>();
    if constexpr (Fallback) {
      for (int64_t o = 0; o < a.outer; ++o) sum_line<T, Acc>(in, a, scale, o, y);
    } else {
      parallel_for(a.outer, std::max<int64_t>(1, 4 * kBlock / std::max<int64_t>(a.n * a.inner, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t o = begin; o < end; ++o) sum_line<T, Acc>(in, a, scale, o, y);
                   });
    }
  });
}

}  // namespace

Kernel<SumLinesFn> sum_lines(
    "sum_lines", {{.name = "long_rows", .applies = few_long_rows, .fn = sum_long_rows},
                  {.name = "wide_slices", .applies = few_wide_slices, .fn = sum_wide_slices},
                  {.name = "openmp", .fn = sum_lines_of<false>},
                  {.name = "scalar", .fn = sum_lines_of<true>, .fallback = true}});

}  // namespace mixp::kernels
