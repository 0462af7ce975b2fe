// mixp/nn/conv2d.h — 2-d convolution of NCHW tensors, as torch.nn.Conv2d (square kernels,
// the same stride, padding and dilation in both dimensions).
//
// Parameters: weight [out_channels, in_channels / groups, kernel_size, kernel_size], bias
// [out_channels] (if options.bias). Initialization, PyTorch's default: U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) for weight and bias, fan_in = in_channels / groups * kernel_size^2.
//
// Example:
//
//   mixp::nn::Conv2d conv(mixp::nn::Conv2dOptions(1, 32, 3).with_padding(1), rng);
//   mixp::Tensor y = conv.forward(x);               // [N, 1, 28, 28] -> [N, 32, 28, 28]
#pragma once

#include "mixp/nn/module.h"

namespace mixp::nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels(in_channels), out_channels(out_channels), kernel_size(kernel_size) {}
  Conv2dOptions& with_stride(int64_t s) {
    stride = s;
    return *this;
  }
  Conv2dOptions& with_padding(int64_t p) {
    padding = p;
    return *this;
  }
  Conv2dOptions& with_bias(bool b) {
    bias = b;
    return *this;
  }

  int64_t in_channels;   ///< divisible by groups
  int64_t out_channels;  ///< divisible by groups
  int64_t kernel_size;   ///< at least 1
  int64_t stride = 1;
  int64_t padding = 0;  ///< zeros on every side
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public UnaryModule {
 public:
  /// Draws the initial values from `rng`, which advances. There is no constructor without a
  /// generator: two layers built alike would start equal.
  Conv2d(const Conv2dOptions& options, Philox& rng);

  /// x [N, in_channels, H, W] -> [N, out_channels, OH, OW] (PyTorch's output sizes).
  Tensor forward(const Tensor& x) override;
  void reset(Philox& rng);

  const Conv2dOptions& options() const { return options_; }
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }

 protected:
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;

 private:
  Conv2dOptions options_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor no_bias_;
};

}  // namespace mixp::nn
