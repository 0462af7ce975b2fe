#include "mixp/nn/pooling.h"

#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

Tensor MaxPool2d::forward(const Tensor& x) {
  const MaxPool2dOptions& o = options_;
  return ops::max_pool2d(x, o.kernel_size, o.kernel_size, o.stride, o.stride, o.padding, o.padding);
}

std::string MaxPool2d::extra_repr() const {
  const int64_t stride = options_.stride == 0 ? options_.kernel_size : options_.stride;
  return detail::concat("kernel_size=", options_.kernel_size, ", stride=", stride,
                        ", padding=", options_.padding, ", dilation=1, ceil_mode=False");
}

Tensor Flatten::forward(const Tensor& x) {
  MIXP_CHECK(x.defined(), "Flatten: an undefined input");
  const int n = x.ndim();
  const int start = x.shape().normalize_dim(options_.start_dim, "Flatten");
  const int end = x.shape().normalize_dim(options_.end_dim, "Flatten");
  MIXP_CHECK(start <= end, "Flatten: start_dim ", options_.start_dim, " is after end_dim ",
             options_.end_dim, " for an input ", x.shape().to_string());
  std::vector<int64_t> dims;
  for (int i = 0; i < start; ++i) dims.push_back(x.size(i));
  int64_t joined = 1;
  for (int i = start; i <= end; ++i) joined *= x.size(i);
  dims.push_back(joined);
  for (int i = end + 1; i < n; ++i) dims.push_back(x.size(i));
  return x.reshape(dims);
}

std::string Flatten::extra_repr() const {
  return detail::concat("start_dim=", options_.start_dim, ", end_dim=", options_.end_dim);
}

}  // namespace mixp::nn
