// The CPU candidates of kernels/conv2d.h: oneDNN's convolution on bf16 where the CPU has
// AVX-512 BF16 (the forward, bias included, and the backward-data also straight to bf16), on
// f32, and on f16 and bf16 widened to f32; the bias and its gradient split over the threads;
// the fallbacks, the double-accumulating loops of kernels/ref/conv_ref.cpp and ops::sum's
// passes through the sum_lines kernel.
#include "kernels/conv2d.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/elementwise.h"
#include "kernels/plane_row_sums_isa.h"
#include "kernels/sum.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

using FastPass = void(const ConvShape&, DType, const void*, const void*, float*);
using ReferencePass = void(const ConvShape&, DType, const void*, const void*, void*);

template <FastPass* fast>
void onednn_native(const ConvShape& s, const Tensor& a, const Tensor& b, Tensor& out) {
  fast(s, a.dtype(), a.raw_data(), b.raw_data(), out.data<float>());
}

template <FastPass* fast>
void onednn_widened(const ConvShape& s, const Tensor& a, const Tensor& b, Tensor& out) {
  const Tensor wide_a = a.to(DType::f32), wide_b = b.to(DType::f32);
  fast(s, DType::f32, wide_a.raw_data(), wide_b.raw_data(), out.data<float>());
}

template <ReferencePass* reference>
void double_loops(const ConvShape& s, const Tensor& a, const Tensor& b, Tensor& out) {
  reference(s, a.dtype(), a.raw_data(), b.raw_data(), out.raw_data());
}

bool is_bf16(const ConvShape&, const Tensor& a, const Tensor&, const Tensor&) {
  return a.dtype() == DType::bf16;
}
bool is_f32(const ConvShape&, const Tensor& a, const Tensor&, const Tensor&) {
  return a.dtype() == DType::f32;
}
bool is_half(const ConvShape&, const Tensor& a, const Tensor&, const Tensor&) {
  return a.dtype() == DType::bf16 || a.dtype() == DType::f16;
}

template <FastPass* fast, ReferencePass* reference>
Kernel<Conv2dPassFn> pass_kernel(const char* name) {
  return Kernel<Conv2dPassFn>(
      name, {{.name = "onednn_bf16",
              .isa = Isa::avx512_bf16,
              .applies = is_bf16,
              .fn = onednn_native<fast>},
             {.name = "onednn_f32", .applies = is_f32, .fn = onednn_native<fast>},
             {.name = "onednn_widened", .applies = is_half, .fn = onednn_widened<fast>},
             {.name = "scalar", .fn = double_loops<reference>, .fallback = true}});
}

template <typename T, bool Parallel>
void add_bias_to(T* y, const T* bias, int64_t channels, int64_t planes, int64_t area) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T value = bias[p % channels];
      for (int64_t k = 0; k < area; ++k) y[p * area + k] += value;
    }
  };
  if constexpr (Parallel) {
    parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(area, 1)), run);
  } else {
    run(0, planes);
  }
}

template <bool Parallel>
void add_bias(Tensor& y, const Tensor& bias) {
  const Tensor wide_bias = bias.to(y.dtype());
  const int64_t channels = y.size(1), planes = y.size(0) * channels, area = y.size(2) * y.size(3);
  if (y.dtype() == DType::f64) {
    add_bias_to<double, Parallel>(y.data<double>(), wide_bias.data<double>(), channels, planes,
                                  area);
  } else {
    add_bias_to<float, Parallel>(y.data<float>(), wide_bias.data<float>(), channels, planes, area);
  }
}

// The sums of an h x w plane's rows, each from +0 in blocks of 256 (blocked_sum), in Acc.
template <typename T>
class ScalarRowSums {
 public:
  using Acc = Compute<T>;
  ScalarRowSums(int64_t h, int64_t w)
      : wide_(std::is_same_v<T, Acc> ? 0 : static_cast<size_t>(h * w)) {}

  void operator()(const T* data, int64_t h, int64_t w, Acc* rows) {
    const Acc* plane = nullptr;
    if constexpr (std::is_same_v<T, Acc>) {
      plane = data;
    } else {
      // f16 and bf16 planes widened once with the vectorized kernel: a conversion per element
      // in the loop below (f16's in software) cost a tenth of an amp-fp16 cnn step. Widening
      // is exact, so the sums keep their bits.
      widen(data, h * w, wide_.data());
      plane = wide_.data();
    }
    int64_t r = 0;
    if (w <= 256) {
      // One block a row: a sum from +0 in order, as blocked_sum's. Eight rows at a time, so
      // that eight chains of dependent additions overlap.
      constexpr int64_t kRows = 8;
      for (; r + kRows <= h; r += kRows) {
        Acc acc[kRows] = {};
        for (int64_t i = 0; i < w; ++i)
          for (int64_t k = 0; k < kRows; ++k) acc[k] += plane[(r + k) * w + i];
        for (int64_t k = 0; k < kRows; ++k) rows[r + k] = acc[k];
      }
    }
    for (; r < h; ++r) rows[r] = blocked_sum<Acc>(plane + r * w, w);
  }

 private:
  std::vector<Acc> wide_;
};

// The same sums of a bf16 or f16 plane for w <= 256: the plane widened into an L1 buffer with
// the vectorized kernel (one stream over memory), then 16 rows summed in the lanes of an
// AVX-512 vector (kernels/plane_row_sums_isa.h).
template <typename T>
class Avx512RowSums {
 public:
  Avx512RowSums(int64_t h, int64_t w) : wide_(static_cast<size_t>(h * w)) {}

  void operator()(const T* plane, int64_t h, int64_t w, float* rows) {
    static_assert(std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>,
                  "bf16 and f16 planes only");
    widen(plane, h * w, wide_.data());
    avx512::plane_row_sums_f32(wide_.data(), h, w, rows);
  }

 private:
  std::vector<float> wide_;
};

// Each plane's rows summed by RowSums, then its rows from +0 in blocks of 256 (blocked_sum),
// then the planes of a channel one image after another: the order of ops::sum(g.to(acc),
// {0, 2, 3}), which reduces W, then H, then N, without its widened copy and its two
// intermediate tensors.
template <typename T, template <typename> class RowSums>
Tensor bias_grad_planes(const Tensor& g) {
  using Acc = Compute<T>;
  const int64_t n = g.size(0), c = g.size(1), h = g.size(2), w = g.size(3);
  const T* data = g.data<T>();
  std::vector<Acc> planes(static_cast<size_t>(n * c));
  parallel_for(n * c, std::max<int64_t>(1, 16 * kBlock / std::max<int64_t>(h * w, 1)),
               [&](int64_t begin, int64_t end) {
                 std::vector<Acc> rows(static_cast<size_t>(h));
                 RowSums<T> row_sums(h, w);
                 for (int64_t p = begin; p < end; ++p) {
                   row_sums(data + p * h * w, h, w, rows.data());
                   planes[size_t(p)] = blocked_sum<Acc>(rows.data(), h);
                 }
               });
  Tensor out = empty({c}, std::is_same_v<Acc, double> ? DType::f64 : DType::f32,
                     MemoryTag::activation, g.device());
  Acc* sums = out.data<Acc>();
  if (c == 1) {
    sums[0] = blocked_sum<Acc>(planes.data(), n);
    return out;
  }
  for (int64_t k = 0; k < c; ++k) sums[k] = Acc(0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k) sums[k] += planes[size_t(i * c + k)];
  return out;
}

Tensor bias_grad_fused(const Tensor& g) {
  Tensor out;
  visit_floating(g.dtype(), "conv2d",
                 [&]<typename T>() { out = bias_grad_planes<T, ScalarRowSums>(g); });
  return out;
}

Tensor bias_grad_avx512(const Tensor& g) {
  Tensor out;
  visit_floating(g.dtype(), "conv2d", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>)
      out = bias_grad_planes<T, Avx512RowSums>(g);
  });
  return out;
}

// The fused sum keeps ops::sum's order except for f64 and where ops::sum splits a long row into
// chunks: fewer than 4 rows, or planes, of more than 65536 elements; one channel over more than
// 65536 images.
bool sums_in_ops_order(const Tensor& g) {
  const int64_t rows = g.size(0) * g.size(1) * g.size(2), planes = g.size(0) * g.size(1);
  return g.dtype() != DType::f64 && !(rows < 4 && g.size(3) > 65536) &&
         !(planes < 4 && g.size(2) > 65536) && !(g.size(1) == 1 && g.size(0) > 65536);
}

// The AVX-512 row sums: one block of ops::sum a row, and bf16 or f16 values. On f32, where the
// scalar loop needs no widening pass, they measured no faster on the cnn's gradients (0.96x
// at [64, 64, 14, 14], 1.1x at [64, 32, 28, 28], one thread).
bool rows_in_one_block(const Tensor& g) {
  return sums_in_ops_order(g) && g.size(3) <= 256 &&
         (g.dtype() == DType::bf16 || g.dtype() == DType::f16);
}

// ops::sum(g.to(acc), {0, 2, 3})'s own passes: W, then H, then N reduced one at a time by the
// sum_lines kernel (its fallback in reference mode, as ops::sum's), each rounded to acc.
Tensor bias_grad_by_dims(const Tensor& g) {
  const DType acc = g.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor current = g.to(acc);
  for (int dim : {3, 2, 0}) {
    std::vector<int64_t> dims(current.shape().dims().begin(), current.shape().dims().end());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= dims[size_t(d)];
    for (int d = dim + 1; d < int(dims.size()); ++d) inner *= dims[size_t(d)];
    const int64_t n = dims[size_t(dim)];
    dims[size_t(dim)] = 1;
    Tensor next = empty(Shape(dims), acc, MemoryTag::activation, current.device());
    sum_lines(current, Lines{outer, n, inner}, 1.0, next);
    current = next;
  }
  return current.view(Shape{g.size(1)});
}

bool bf16_to_bf16(const ConvShape&, const Tensor& x, const Tensor&, const Tensor&,
                  const Tensor& y) {
  return x.dtype() == DType::bf16 && y.dtype() == DType::bf16;
}

void onednn_bf16_direct(const ConvShape& s, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Tensor& y) {
  const Tensor wide_bias = bias.defined() ? bias.to(DType::f32) : Tensor();
  conv2d_forward_fast_to(s, DType::bf16, x.raw_data(), weight.raw_data(),
                         bias.defined() ? wide_bias.data<float>() : nullptr, DType::bf16,
                         y.raw_data());
}

// The pass into the accumulation dtype (y itself when it has that dtype, else a workspace
// buffer), the bias added there, and one rounding to y's dtype.
void through_accumulation(const ConvShape& s, const Tensor& x, const Tensor& weight,
                          const Tensor& bias, Tensor& y) {
  const DType acc = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (y.dtype() == acc) {
    conv2d_forward(s, x, weight, y);
    if (bias.defined()) conv2d_add_bias(y, bias);
    return;
  }
  Tensor wide = empty(y.shape(), acc, MemoryTag::workspace, y.device());
  conv2d_forward(s, x, weight, wide);
  if (bias.defined()) conv2d_add_bias(wide, bias);
  y.copy_(wide);
}

bool bf16_to_bf16_pass(const ConvShape&, const Tensor& dy, const Tensor&, const Tensor& dx) {
  return dy.dtype() == DType::bf16 && dx.dtype() == DType::bf16;
}

void onednn_bf16_direct_backward_data(const ConvShape& s, const Tensor& dy, const Tensor& weight,
                                      Tensor& dx) {
  conv2d_backward_data_fast_to(s, DType::bf16, dy.raw_data(), weight.raw_data(), DType::bf16,
                               dx.raw_data());
}

// The pass into the accumulation dtype (dx itself when it has that dtype, else a workspace
// buffer), then one rounding to dx's dtype.
void backward_data_through_accumulation(const ConvShape& s, const Tensor& dy, const Tensor& weight,
                                        Tensor& dx) {
  const DType acc = dy.dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (dx.dtype() == acc) {
    conv2d_backward_data(s, dy, weight, dx);
    return;
  }
  Tensor wide = empty(dx.shape(), acc, MemoryTag::workspace, dx.device());
  conv2d_backward_data(s, dy, weight, wide);
  dx.copy_(wide);
}

bool shared_applies(const Tensor& x, const Tensor& dx, const Tensor& dweight, DType in) {
  return x.dtype() == in && (dx.dtype() == in || dx.dtype() == DType::f32) &&
         dweight.dtype() == DType::f32;
}
bool bf16_backward(const ConvShape&, const Tensor& x, const Tensor&, const Tensor&,
                   const Tensor& dx, const Tensor& dweight) {
  return shared_applies(x, dx, dweight, DType::bf16);
}
bool f32_backward(const ConvShape&, const Tensor& x, const Tensor&, const Tensor&, const Tensor& dx,
                  const Tensor& dweight) {
  return shared_applies(x, dx, dweight, DType::f32);
}
bool half_backward(const ConvShape&, const Tensor& x, const Tensor&, const Tensor&,
                   const Tensor& dx, const Tensor& dweight) {
  return shared_applies(x, dx, dweight, DType::bf16) || shared_applies(x, dx, dweight, DType::f16);
}

void onednn_shared_dy(const ConvShape& s, const Tensor& x, const Tensor& dy, const Tensor& weight,
                      Tensor& dx, Tensor& dweight) {
  conv2d_backward_fast(s, x.dtype(), x.raw_data(), dy.raw_data(), weight.raw_data(), dx.dtype(),
                       dx.raw_data(), dweight.data<float>());
}

// dy widened once for both passes (the two kernels in turn widen it once each); x only after
// dx is rounded and its fp32 buffer freed, so that the peak is the two kernels' in turn.
void onednn_widened_dy_once(const ConvShape& s, const Tensor& x, const Tensor& dy,
                            const Tensor& weight, Tensor& dx, Tensor& dweight) {
  const Tensor wide_dy = dy.to(DType::f32);
  {
    const Tensor wide_weight = weight.to(DType::f32);
    Tensor wide_dx = dx.dtype() == DType::f32
                         ? dx
                         : empty(dx.shape(), DType::f32, MemoryTag::workspace, dx.device());
    conv2d_backward_data_fast(s, DType::f32, wide_dy.raw_data(), wide_weight.raw_data(),
                              wide_dx.data<float>());
    if (dx.dtype() != DType::f32) dx.copy_(wide_dx);
  }
  const Tensor wide_x = x.to(DType::f32);
  conv2d_backward_weights_fast(s, DType::f32, wide_x.raw_data(), wide_dy.raw_data(),
                               dweight.data<float>());
}

void backward_passes_in_turn(const ConvShape& s, const Tensor& x, const Tensor& dy,
                             const Tensor& weight, Tensor& dx, Tensor& dweight) {
  conv2d_backward_data_rounded(s, dy, weight, dx);
  conv2d_backward_weights(s, x, dy, dweight);
}

}  // namespace

Kernel<Conv2dBackwardFn> conv2d_backward(
    "conv2d_backward",
    {{.name = "onednn_bf16_shared_dy",
      .isa = Isa::avx512_bf16,
      .applies = bf16_backward,
      .fn = onednn_shared_dy},
     {.name = "onednn_f32_shared_dy", .applies = f32_backward, .fn = onednn_shared_dy},
     {.name = "onednn_widened_dy_once", .applies = half_backward, .fn = onednn_widened_dy_once},
     {.name = "in_turn", .fn = backward_passes_in_turn, .fallback = true}});

Kernel<Conv2dPassFn> conv2d_backward_data_rounded(
    "conv2d_backward_data_rounded",
    {{.name = "onednn_bf16_direct",
      .isa = Isa::avx512_bf16,
      .applies = bf16_to_bf16_pass,
      .fn = onednn_bf16_direct_backward_data},
     {.name = "through_accumulation", .fn = backward_data_through_accumulation, .fallback = true}});

Kernel<Conv2dBiasedForwardFn> conv2d_biased_forward(
    "conv2d_biased_forward",
    {{.name = "onednn_bf16_direct",
      .isa = Isa::avx512_bf16,
      .applies = bf16_to_bf16,
      .fn = onednn_bf16_direct},
     {.name = "through_accumulation", .fn = through_accumulation, .fallback = true}});

Kernel<Conv2dPassFn> conv2d_forward =
    pass_kernel<conv2d_forward_fast, conv2d_forward_reference>("conv2d_forward");
Kernel<Conv2dPassFn> conv2d_backward_data =
    pass_kernel<conv2d_backward_data_fast, conv2d_backward_data_reference>("conv2d_backward_data");
Kernel<Conv2dPassFn> conv2d_backward_weights =
    pass_kernel<conv2d_backward_weights_fast, conv2d_backward_weights_reference>(
        "conv2d_backward_weights");

Kernel<Conv2dAddBiasFn> conv2d_add_bias(
    "conv2d_add_bias", {{.name = "openmp", .fn = add_bias<true>},
                        {.name = "scalar", .fn = add_bias<false>, .fallback = true}});

Kernel<Conv2dBiasGradFn> conv2d_bias_grad(
    "conv2d_bias_grad",
    {{.name = "avx512_fused",
      .isa = Isa::avx512,
      .applies = rows_in_one_block,
      .fn = bias_grad_avx512},
     {.name = "openmp_fused", .applies = sums_in_ops_order, .fn = bias_grad_fused},
     {.name = "by_dims", .fn = bias_grad_by_dims, .fallback = true}});

}  // namespace mixp::kernels
