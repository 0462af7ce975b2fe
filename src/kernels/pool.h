// 2-d pooling over planes of contiguous [planes, h, w] buffers. Private to mixp.
//   fast: planes split over OpenMP threads, fp32 compute for f32, f16 and bf16 (double for
//         f64), one rounding to the storage dtype.
//   reference: serial, accumulating in double, one rounding.
// The windows are given per axis, so one set of kernels serves max_pool2d, avg_pool2d and
// adaptive_avg_pool2d.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mixp/dtype.h"

namespace mixp::kernels {

/// The windows along one axis: output i reads input [start[i], end[i]) (already clipped to the
/// input); an average divides by count[i] along this axis (count_include_pad: the padded size).
struct PoolAxis {
  std::vector<int64_t> start, end, count;
  int64_t size() const { return int64_t(start.size()); }
};

struct Pool2dShape {
  int64_t planes = 0, h = 0, w = 0;  ///< input; the output is [planes, rows.size(), cols.size()]
  PoolAxis rows, cols;
};

/// Sliding windows of `kernel` taps every `stride` over `size` inputs padded by `pad` on both
/// sides: floor((size + 2 pad - kernel) / stride) + 1 outputs. Needs size + 2 pad >= kernel.
inline PoolAxis sliding_axis(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  PoolAxis a;
  const int64_t out = (size + 2 * pad - kernel) / stride + 1;
  for (int64_t i = 0; i < out; ++i) {
    const int64_t begin = i * stride - pad;
    a.start.push_back(std::max<int64_t>(begin, 0));
    a.end.push_back(std::min(begin + kernel, size));
    a.count.push_back(kernel);
  }
  return a;
}

/// PyTorch's adaptive windows: output i of `out` reads [floor(i size / out),
/// ceil((i + 1) size / out)), and an average divides by that window's length.
inline PoolAxis adaptive_axis(int64_t size, int64_t out) {
  PoolAxis a;
  for (int64_t i = 0; i < out; ++i) {
    const int64_t begin = i * size / out, end = ((i + 1) * size + out - 1) / out;
    a.start.push_back(begin);
    a.end.push_back(end);
    a.count.push_back(end - begin);
  }
  return a;
}

/// y = the window means of x (dtype dt; f32, f64, f16 or bf16).
void avg_pool2d_forward_fast(const Pool2dShape& p, DType dt, const void* x, void* y);
/// dx = dy spread evenly over each window, summed where windows overlap.
void avg_pool2d_backward_fast(const Pool2dShape& p, DType dt, const void* dy, void* dx);
/// y = the window maxima of x, index = the position (h * w + column, within the plane) of the
/// first maximum of each window in row-major order; a NaN counts as the maximum.
void max_pool2d_forward_fast(const Pool2dShape& p, DType dt, const void* x, void* y,
                             int64_t* index);
/// dx = dy sent to each window's index, summed where several windows chose the same input.
void max_pool2d_backward_fast(const Pool2dShape& p, DType dt, const void* dy, const int64_t* index,
                              void* dx);

namespace avx512 {
/// True when max_pool2d_pairs takes p and dt: f32, bf16 or f16, every window two columns wide at
/// columns 2j and 2j + 1 (2 x 2 pooling with stride 2 and no column padding; any rows).
bool max_pool2d_pairs_apply(const Pool2dShape& p, DType dt);
/// max_pool2d_forward_fast's results, bit for bit, 16 windows at a time.
void max_pool2d_pairs(const Pool2dShape& p, DType dt, const void* x, void* y, int64_t* index);
}  // namespace avx512

void avg_pool2d_forward_reference(const Pool2dShape& p, DType dt, const void* x, void* y);
void avg_pool2d_backward_reference(const Pool2dShape& p, DType dt, const void* dy, void* dx);
void max_pool2d_forward_reference(const Pool2dShape& p, DType dt, const void* x, void* y,
                                  int64_t* index);
void max_pool2d_backward_reference(const Pool2dShape& p, DType dt, const void* dy,
                                   const int64_t* index, void* dx);

}  // namespace mixp::kernels
