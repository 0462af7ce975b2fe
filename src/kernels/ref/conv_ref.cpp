// Reference 2-d convolution: each output element of each pass is one sum, accumulated in
// double over exactly the terms the definition names, in a fixed order.
#include "kernels/conv.h"
#include "tensor/element.h"

namespace mixp::kernels {
namespace {

void store(void* out, DType in, int64_t i, double v) {
  if (in == DType::f64)
    static_cast<double*>(out)[i] = v;
  else
    static_cast<float*>(out)[i] = float(v);
}

}  // namespace

void conv2d_forward_reference(const ConvShape& s, DType in, const void* x, const void* weight,
                              void* y) {
  const int64_t cg = s.c / s.groups, og = s.o / s.groups;
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t o = 0; o < s.o; ++o) {
      const int64_t c0 = (o / og) * cg;
      for (int64_t i = 0; i < s.oh; ++i) {
        for (int64_t j = 0; j < s.ow; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < cg; ++c) {
            for (int64_t p = 0; p < s.kh; ++p) {
              const int64_t h = i * s.stride_h - s.pad_h + p * s.dilation_h;
              if (h < 0 || h >= s.h) continue;
              for (int64_t q = 0; q < s.kw; ++q) {
                const int64_t w = j * s.stride_w - s.pad_w + q * s.dilation_w;
                if (w < 0 || w >= s.w) continue;
                acc += load_element(x, in, ((n * s.c + c0 + c) * s.h + h) * s.w + w) *
                       load_element(weight, in, ((o * cg + c) * s.kh + p) * s.kw + q);
              }
            }
          }
          store(y, in, ((n * s.o + o) * s.oh + i) * s.ow + j, acc);
        }
      }
    }
  }
}

void conv2d_backward_data_reference(const ConvShape& s, DType in, const void* dy,
                                    const void* weight, void* dx) {
  const int64_t cg = s.c / s.groups, og = s.o / s.groups;
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t c = 0; c < s.c; ++c) {
      const int64_t group = c / cg, cl = c % cg;
      for (int64_t h = 0; h < s.h; ++h) {
        for (int64_t w = 0; w < s.w; ++w) {
          // Every (output position, kernel tap) that reads x[n, c, h, w].
          double acc = 0;
          for (int64_t ol = 0; ol < og; ++ol) {
            const int64_t o = group * og + ol;
            for (int64_t p = 0; p < s.kh; ++p) {
              const int64_t hi = h + s.pad_h - p * s.dilation_h;
              if (hi < 0 || hi % s.stride_h != 0 || hi / s.stride_h >= s.oh) continue;
              for (int64_t q = 0; q < s.kw; ++q) {
                const int64_t wj = w + s.pad_w - q * s.dilation_w;
                if (wj < 0 || wj % s.stride_w != 0 || wj / s.stride_w >= s.ow) continue;
                acc +=
                    load_element(
                        dy, in, ((n * s.o + o) * s.oh + hi / s.stride_h) * s.ow + wj / s.stride_w) *
                    load_element(weight, in, ((o * cg + cl) * s.kh + p) * s.kw + q);
              }
            }
          }
          store(dx, in, ((n * s.c + c) * s.h + h) * s.w + w, acc);
        }
      }
    }
  }
}

void conv2d_backward_weights_reference(const ConvShape& s, DType in, const void* x, const void* dy,
                                       void* dweight) {
  const int64_t cg = s.c / s.groups, og = s.o / s.groups;
  for (int64_t o = 0; o < s.o; ++o) {
    const int64_t c0 = (o / og) * cg;
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t p = 0; p < s.kh; ++p) {
        for (int64_t q = 0; q < s.kw; ++q) {
          double acc = 0;
          for (int64_t n = 0; n < s.n; ++n) {
            for (int64_t i = 0; i < s.oh; ++i) {
              const int64_t h = i * s.stride_h - s.pad_h + p * s.dilation_h;
              if (h < 0 || h >= s.h) continue;
              for (int64_t j = 0; j < s.ow; ++j) {
                const int64_t w = j * s.stride_w - s.pad_w + q * s.dilation_w;
                if (w < 0 || w >= s.w) continue;
                acc += load_element(dy, in, ((n * s.o + o) * s.oh + i) * s.ow + j) *
                       load_element(x, in, ((n * s.c + c0 + c) * s.h + h) * s.w + w);
              }
            }
          }
          store(dweight, in, ((o * cg + c) * s.kh + p) * s.kw + q, acc);
        }
      }
    }
  }
}

}  // namespace mixp::kernels
