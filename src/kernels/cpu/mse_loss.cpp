// The CPU candidates of kernels/mse_loss.h: the loss on one thread in the compute type, the
// gradient in blocks over the threads (kernels/elementwise.h), and the fallback of each,
// computing in double on one thread.
#include "kernels/mse_loss.h"

#include "kernels/elementwise.h"

namespace mixp::kernels {
namespace {

template <bool Fallback>
double mse_loss_cpu(const Tensor& prediction, const Tensor& target) {
  return visit_floating(prediction.dtype(), "mse_loss", [&]<typename T>() {
    using Acc = std::conditional_t<Fallback, double, Compute<T>>;
    const T* a = prediction.data<T>();
    const T* b = target.data<T>();
    const int64_t n = prediction.numel();
    Acc total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const Acc d = Acc(to_double(a[i])) - Acc(to_double(b[i]));
      total += d * d;
    }
    return double(total) / double(n);
  });
}

template <bool Fallback>
void mse_loss_backward_cpu(const Tensor& prediction, const Tensor& target, double scale,
                           Tensor& dprediction) {
  visit_floating(prediction.dtype(), "mse_loss", [&]<typename T>() {
    auto f = [&](auto x, auto y) { return decltype(x)(scale) * (x - y); };
    const int64_t n = prediction.numel();
    if constexpr (Fallback) {
      map2_reference(prediction.data<T>(), target.data<T>(), dprediction.data<T>(), n, f);
    } else {
      map2_fast(prediction.data<T>(), target.data<T>(), dprediction.data<T>(), n, f);
    }
  });
}

}  // namespace

Kernel<MseLossFn> mse_loss("mse_loss",
                           {{.name = "fp32", .fn = mse_loss_cpu<false>},
                            {.name = "scalar", .fn = mse_loss_cpu<true>, .fallback = true}});

Kernel<MseLossBackwardFn> mse_loss_backward(
    "mse_loss_backward", {{.name = "openmp", .fn = mse_loss_backward_cpu<false>},
                          {.name = "scalar", .fn = mse_loss_backward_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
