// Reference pooling: one element at a time through load_element/store_element, in double,
// rounded once.
#include <cmath>
#include <vector>

#include "kernels/pool.h"
#include "tensor/element.h"

namespace mixp::kernels {

void avg_pool2d_forward_reference(const Pool2dShape& p, DType dt, const void* x, void* y) {
  const int64_t oh = p.rows.size(), ow = p.cols.size();
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        double total = 0;
        for (int64_t h = p.rows.start[size_t(i)]; h < p.rows.end[size_t(i)]; ++h) {
          for (int64_t w = p.cols.start[size_t(j)]; w < p.cols.end[size_t(j)]; ++w) {
            total += load_element(x, dt, (plane * p.h + h) * p.w + w);
          }
        }
        const double divisor = double(p.rows.count[size_t(i)] * p.cols.count[size_t(j)]);
        store_element(y, dt, (plane * oh + i) * ow + j, total / divisor);
      }
    }
  }
}

void avg_pool2d_backward_reference(const Pool2dShape& p, DType dt, const void* dy, void* dx) {
  const int64_t oh = p.rows.size(), ow = p.cols.size();
  std::vector<double> acc(static_cast<size_t>(p.h * p.w));
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const double divisor = double(p.rows.count[size_t(i)] * p.cols.count[size_t(j)]);
        const double share = load_element(dy, dt, (plane * oh + i) * ow + j) / divisor;
        for (int64_t h = p.rows.start[size_t(i)]; h < p.rows.end[size_t(i)]; ++h) {
          for (int64_t w = p.cols.start[size_t(j)]; w < p.cols.end[size_t(j)]; ++w) {
            acc[size_t(h * p.w + w)] += share;
          }
        }
      }
    }
    for (int64_t k = 0; k < p.h * p.w; ++k) {
      store_element(dx, dt, plane * p.h * p.w + k, acc[size_t(k)]);
    }
  }
}

void max_pool2d_forward_reference(const Pool2dShape& p, DType dt, const void* x, void* y,
                                  int64_t* index) {
  const int64_t oh = p.rows.size(), ow = p.cols.size();
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        int64_t best = -1;
        double best_value = 0;
        for (int64_t h = p.rows.start[size_t(i)]; h < p.rows.end[size_t(i)]; ++h) {
          for (int64_t w = p.cols.start[size_t(j)]; w < p.cols.end[size_t(j)]; ++w) {
            const double v = load_element(x, dt, (plane * p.h + h) * p.w + w);
            const bool first = best < 0, best_is_nan = !first && std::isnan(best_value);
            if (first || (!best_is_nan && (v > best_value || std::isnan(v)))) {
              best = h * p.w + w;
              best_value = v;
            }
          }
        }
        const int64_t o = (plane * oh + i) * ow + j;
        store_element(y, dt, o, best_value);
        index[o] = best;
      }
    }
  }
}

void max_pool2d_backward_reference(const Pool2dShape& p, DType dt, const void* dy,
                                   const int64_t* index, void* dx) {
  const int64_t outputs = p.rows.size() * p.cols.size();
  std::vector<double> acc(static_cast<size_t>(p.h * p.w));
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < outputs; ++k) {
      acc[size_t(index[plane * outputs + k])] += load_element(dy, dt, plane * outputs + k);
    }
    for (int64_t k = 0; k < p.h * p.w; ++k) {
      store_element(dx, dt, plane * p.h * p.w + k, acc[size_t(k)]);
    }
  }
}

}  // namespace mixp::kernels
