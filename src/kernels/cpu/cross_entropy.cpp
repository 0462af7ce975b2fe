// The CPU candidates of kernels/cross_entropy.h: the loss on one thread in the compute type,
// the gradient's rows split over the threads, and the fallback of each, computing in double on
// one thread.
#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "kernels/elementwise.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

// log(sum_k exp(row[k])), the maximum subtracted first.
template <typename T, typename Acc>
Acc row_lse(const T* row, int64_t c) {
  Acc m = Acc(to_double(row[0]));
  for (int64_t k = 1; k < c; ++k) m = std::max(m, Acc(to_double(row[k])));
  Acc total = 0;
  for (int64_t k = 0; k < c; ++k) total += std::exp(Acc(to_double(row[k])) - m);
  return m + std::log(total);
}

template <bool Fallback>
CrossEntropyMean cross_entropy_cpu(const Tensor& logits, const Tensor& targets,
                                   int64_t ignore_index, double label_smoothing) {
  return visit_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using Acc = std::conditional_t<Fallback, double, Compute<T>>;
    const int64_t n = logits.shape()[0], c = logits.shape()[1];
    const T* x = logits.data<T>();
    const int64_t* target = targets.data<int64_t>();
    const Acc eps = Acc(label_smoothing);
    Acc total = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (target[i] == ignore_index) continue;
      const T* row = x + i * c;
      const Acc lse = row_lse<T, Acc>(row, c);
      Acc loss = -(Acc(1) - eps) * (Acc(to_double(row[target[i]])) - lse);
      if (eps != Acc(0)) {
        Acc sum_logp = 0;
        for (int64_t k = 0; k < c; ++k) sum_logp += Acc(to_double(row[k])) - lse;
        loss -= eps / Acc(c) * sum_logp;
      }
      total += loss;
      ++count;
    }
    const double mean =
        count == 0 ? std::numeric_limits<double>::quiet_NaN() : double(total) / double(count);
    return CrossEntropyMean{.loss = mean, .count = count};
  });
}

template <bool Fallback>
void cross_entropy_backward_cpu(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                double label_smoothing, double scale_in, Tensor& dlogits) {
  visit_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using Acc = std::conditional_t<Fallback, double, Compute<T>>;
    const int64_t n = logits.shape()[0], c = logits.shape()[1];
    const T* x = logits.data<T>();
    const int64_t* target = targets.data<int64_t>();
    T* d = dlogits.data<T>();
    const Acc eps = Acc(label_smoothing);
    const Acc scale = Acc(scale_in);
    auto rows = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T* drow = d + i * c;
        if (target[i] == ignore_index) {
          for (int64_t k = 0; k < c; ++k) drow[k] = from_double<T>(0.0);
          continue;
        }
        const T* row = x + i * c;
        const Acc lse = row_lse<T, Acc>(row, c);
        for (int64_t k = 0; k < c; ++k) {
          const Acc p = std::exp(Acc(to_double(row[k])) - lse);
          const Acc q = (k == target[i] ? Acc(1) - eps : Acc(0)) + eps / Acc(c);
          drow[k] = from_double<T>(double(scale * (p - q)));
        }
      }
    };
    if constexpr (Fallback) {
      rows(0, n);
    } else {
      parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), rows);
    }
  });
}

void check_targets_cpu(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  const int64_t* t = targets.data<int64_t>();
  for (int64_t i = 0; i < targets.numel(); ++i) {
    MIXP_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < classes), "cross_entropy: target ",
               t[i], " of row ", i, " is not a class in [0, ", classes, ") nor ignore_index ",
               ignore_index);
  }
}

}  // namespace

Kernel<CrossEntropyCheckTargetsFn> cross_entropy_check_targets(
    "cross_entropy_check_targets",
    {{.name = "scalar", .fn = check_targets_cpu, .fallback = true}});

Kernel<CrossEntropyFn> cross_entropy(
    "cross_entropy", {{.name = "fp32", .fn = cross_entropy_cpu<false>},
                      {.name = "scalar", .fn = cross_entropy_cpu<true>, .fallback = true}});

Kernel<CrossEntropyBackwardFn> cross_entropy_backward(
    "cross_entropy_backward",
    {{.name = "openmp", .fn = cross_entropy_backward_cpu<false>},
     {.name = "scalar", .fn = cross_entropy_backward_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
