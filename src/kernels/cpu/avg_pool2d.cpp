// The cpu candidates of kernels/avg_pool2d.h: the planes split over the threads, and the
// fallback, one thread accumulating in double.
#include "kernels/avg_pool2d.h"

namespace mixp::kernels {
namespace {

// The pool.h kernels take raw buffers; the registry needs the tensors, to know the call's
// device.
template <auto forward>
void forward_on(const Pool2dShape& p, const Tensor& x, Tensor& y) {
  forward(p, x.dtype(), x.raw_data(), y.raw_data());
}

template <auto backward>
void backward_on(const Pool2dShape& p, const Tensor& dy, Tensor& dx) {
  backward(p, dy.dtype(), dy.raw_data(), dx.raw_data());
}

}  // namespace

Kernel<AvgPool2dFn> avg_pool2d_forward(
    "avg_pool2d_forward",
    {{.name = "openmp", .fn = forward_on<avg_pool2d_forward_fast>},
     {.name = "scalar", .fn = forward_on<avg_pool2d_forward_reference>, .fallback = true}});

Kernel<AvgPool2dBackwardFn> avg_pool2d_backward(
    "avg_pool2d_backward",
    {{.name = "openmp", .fn = backward_on<avg_pool2d_backward_fast>},
     {.name = "scalar", .fn = backward_on<avg_pool2d_backward_reference>, .fallback = true}});

}  // namespace mixp::kernels
