// The CPU candidates of kernels/max_pool2d.h: AVX-512 for 2 x 2 column pairs, the planes split
// over the threads, and the fallback, one thread accumulating the backward in double.
#include "kernels/max_pool2d.h"

namespace mixp::kernels {
namespace {

// The pool.h kernels take raw buffers, which the AVX-512 file needs (it shares no inline code
// with the other files); the registry needs the tensors, to know the call's device.
template <auto forward>
void forward_on(const Pool2dShape& p, const Tensor& x, Tensor& y, Tensor& index) {
  forward(p, x.dtype(), x.raw_data(), y.raw_data(), index.data<int64_t>());
}

template <auto backward>
void backward_on(const Pool2dShape& p, const Tensor& dy, const Tensor& index, Tensor& dx) {
  backward(p, dy.dtype(), dy.raw_data(), index.data<int64_t>(), dx.raw_data());
}

bool column_pairs(const Pool2dShape& p, const Tensor& x, const Tensor&, const Tensor&) {
  return avx512::max_pool2d_pairs_apply(p, x.dtype());
}

}  // namespace

Kernel<MaxPool2dFn> max_pool2d_forward(
    "max_pool2d_forward",
    {{.name = "avx512_pairs",
      .isa = Isa::avx512,
      .applies = column_pairs,
      .fn = forward_on<avx512::max_pool2d_pairs>},
     {.name = "openmp", .fn = forward_on<max_pool2d_forward_fast>},
     {.name = "scalar", .fn = forward_on<max_pool2d_forward_reference>, .fallback = true}});

Kernel<MaxPool2dBackwardFn> max_pool2d_backward(
    "max_pool2d_backward",
    {{.name = "openmp", .fn = backward_on<max_pool2d_backward_fast>},
     {.name = "scalar", .fn = backward_on<max_pool2d_backward_reference>, .fallback = true}});

}  // namespace mixp::kernels
