#include "mixp/nn/linear.h"

#include <cmath>

#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

Linear::Linear(const LinearOptions& options, Philox& rng) : options_(options) {
  MIXP_CHECK(options.in_features >= 1 && options.out_features >= 1,
             "Linear: in_features and out_features must be at least 1, got ", options.in_features,
             " and ", options.out_features);
  weight_ = &register_parameter("weight", zeros({options.out_features, options.in_features},
                                                DType::f32, MemoryTag::parameter));
  bias_ = options.bias ? &register_parameter("bias", zeros({options.out_features}, DType::f32,
                                                           MemoryTag::parameter))
                       : &no_bias_;
  reset(rng);
}

void Linear::reset(Philox& rng) {
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)) times sqrt(3 / fan_in).
  const double bound = 1.0 / std::sqrt(double(options_.in_features));
  weight_->copy_(uniform(weight_->shape(), rng, -bound, bound));
  if (options_.bias) bias_->copy_(uniform(bias_->shape(), rng, -bound, bound));
}

Tensor Linear::forward(const Tensor& x) {
  MIXP_CHECK(x.defined() && x.ndim() >= 1 && x.size(-1) == options_.in_features,
             "Linear: expected an input [..., ", options_.in_features, "], got ",
             x.defined() ? x.shape().to_string() : "an undefined tensor");
  run_forward_pre_hooks(x);
  return run_forward_hooks(ops::linear(x, *weight_, *bias_));
}

std::string Linear::extra_repr() const {
  return detail::concat("in_features=", options_.in_features,
                        ", out_features=", options_.out_features,
                        ", bias=", options_.bias ? "True" : "False");
}

}  // namespace mixp::nn
