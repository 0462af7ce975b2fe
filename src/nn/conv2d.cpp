#include "mixp/nn/conv2d.h"

#include <cmath>

#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

Conv2d::Conv2d(const Conv2dOptions& options, Philox& rng) : options_(options) {
  const Conv2dOptions& o = options;
  MIXP_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.kernel_size >= 1 && o.stride >= 1 &&
                 o.padding >= 0 && o.dilation >= 1 && o.groups >= 1,
             "Conv2d: bad options in_channels=", o.in_channels, " out_channels=", o.out_channels,
             " kernel_size=", o.kernel_size, " stride=", o.stride, " padding=", o.padding,
             " dilation=", o.dilation, " groups=", o.groups);
  MIXP_CHECK(o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0,
             "Conv2d: groups=", o.groups, " must divide in_channels=", o.in_channels,
             " and out_channels=", o.out_channels);
  weight_ = &register_parameter(
      "weight", zeros({o.out_channels, o.in_channels / o.groups, o.kernel_size, o.kernel_size},
                      DType::f32, MemoryTag::parameter));
  bias_ = o.bias ? &register_parameter("bias",
                                       zeros({o.out_channels}, DType::f32, MemoryTag::parameter))
                 : &no_bias_;
  reset(rng);
}

void Conv2d::reset(Philox& rng) {
  const int64_t fan_in =
      options_.in_channels / options_.groups * options_.kernel_size * options_.kernel_size;
  const double bound = 1.0 / std::sqrt(double(fan_in));
  weight_->copy_(uniform(weight_->shape(), rng, -bound, bound));
  if (options_.bias) bias_->copy_(uniform(bias_->shape(), rng, -bound, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  MIXP_CHECK(x.defined() && x.ndim() == 4 && x.size(1) == options_.in_channels,
             "Conv2d: expected an input [N, ", options_.in_channels, ", H, W], got ",
             x.defined() ? x.shape().to_string() : "an undefined tensor");
  ops::Conv2dOptions o;
  o.stride_h = o.stride_w = options_.stride;
  o.pad_h = o.pad_w = options_.padding;
  o.dilation_h = o.dilation_w = options_.dilation;
  o.groups = options_.groups;
  return run_forward_hooks(ops::conv2d(x, *weight_, *bias_, o));
}

std::string Conv2d::extra_repr() const {
  const Conv2dOptions& o = options_;
  std::string s =
      detail::concat(o.in_channels, ", ", o.out_channels, ", kernel_size=(", o.kernel_size, ", ",
                     o.kernel_size, "), stride=(", o.stride, ", ", o.stride, ")");
  if (o.padding != 0) s += detail::concat(", padding=(", o.padding, ", ", o.padding, ")");
  if (o.dilation != 1) s += detail::concat(", dilation=(", o.dilation, ", ", o.dilation, ")");
  if (o.groups != 1) s += detail::concat(", groups=", o.groups);
  if (!o.bias) s += ", bias=False";
  return s;
}

}  // namespace mixp::nn
