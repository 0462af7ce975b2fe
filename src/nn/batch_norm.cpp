#include "mixp/nn/batch_norm.h"

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

BatchNorm2d::BatchNorm2d(const BatchNorm2dOptions& options) : options_(options) {
  const int64_t c = options.num_features;
  MIXP_CHECK(c >= 1, "BatchNorm2d: num_features must be at least 1, got ", c);
  MIXP_CHECK(options.eps > 0, "BatchNorm2d: eps must be positive, got ", options.eps);
  MIXP_CHECK(options.momentum >= 0 && options.momentum <= 1,
             "BatchNorm2d: momentum must be in [0, 1], got ", options.momentum);
  if (options.affine) {
    weight_ = &register_parameter("weight", ones({c}, DType::f32, MemoryTag::parameter));
    bias_ = &register_parameter("bias", zeros({c}, DType::f32, MemoryTag::parameter));
  }
  if (options.track_running_stats) {
    running_mean_ = &register_buffer("running_mean", zeros({c}, DType::f32, MemoryTag::parameter));
    running_var_ = &register_buffer("running_var", ones({c}, DType::f32, MemoryTag::parameter));
    num_batches_tracked_ =
        &register_buffer("num_batches_tracked", zeros(Shape{}, DType::i64, MemoryTag::parameter));
  }
}

void BatchNorm2d::reset() {
  if (options_.affine) {
    weight_->fill_(1.0);
    bias_->fill_(0.0);
  }
  if (options_.track_running_stats) {
    running_mean_->fill_(0.0);
    running_var_->fill_(1.0);
    num_batches_tracked_->fill_(0.0);
  }
}

Tensor BatchNorm2d::run(const Tensor& x, Fused fused) {
  MIXP_CHECK(x.defined() && (x.ndim() == 4 || x.ndim() == 2) && x.size(1) == options_.num_features,
             "BatchNorm2d: expected an input [N, ", options_.num_features, ", H, W], got ",
             x.defined() ? x.shape().to_string() : "an undefined tensor");
  const bool batch_stats = is_training() || !options_.track_running_stats;
  const auto op = fused == Fused::relu_max_pool ? ops::batch_norm_relu_max_pool2d
                  : fused == Fused::relu        ? ops::batch_norm_relu
                                                : ops::batch_norm;
  Tensor y = op(x, *weight_, *bias_, *running_mean_, *running_var_, batch_stats, options_.momentum,
                options_.eps);
  if (is_training() && options_.track_running_stats) {
    num_batches_tracked_->data<int64_t>()[0] += 1;
  }
  return y;
}

Tensor BatchNorm2d::forward(const Tensor& x) { return run_forward_hooks(run(x, Fused::none)); }

Tensor BatchNorm2d::forward_relu(const Tensor& x) {
  if (has_hooks()) return ops::relu(forward(x));
  return run(x, Fused::relu);
}

Tensor BatchNorm2d::forward_relu_max_pool(const Tensor& x) {
  if (has_hooks()) return ops::max_pool2d(ops::relu(forward(x)), 2, 2);
  return run(x, Fused::relu_max_pool);
}

std::string BatchNorm2d::extra_repr() const {
  return detail::concat(options_.num_features, ", eps=", options_.eps,
                        ", momentum=", options_.momentum,
                        ", affine=", options_.affine ? "True" : "False",
                        ", track_running_stats=", options_.track_running_stats ? "True" : "False");
}

}  // namespace mixp::nn
