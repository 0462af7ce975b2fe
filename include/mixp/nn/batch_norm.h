// mixp/nn/batch_norm.h — batch normalization of NCHW tensors per channel, as
// torch.nn.BatchNorm2d.
//
// Parameters: weight [C] (ones), bias [C] (zeros), if options.affine. Buffers, if
// options.track_running_stats: running_mean [C] f32 (zeros), running_var [C] f32 (ones),
// num_batches_tracked i64 scalar (0). Training mode normalizes with the batch statistics and
// updates the running ones (running = (1 - momentum) running + momentum batch, the unbiased
// batch variance for running_var) and counts the batch; evaluation mode normalizes with the
// running statistics. The statistics are fp32 whatever the input dtype; a norm layer, so the
// bf16 and fp16 presets keep its parameters in fp32.
//
// Example:
//
//   mixp::nn::BatchNorm2d bn(mixp::nn::BatchNorm2dOptions(32));
//   mixp::Tensor y = bn.forward(x);                 // x [N, 32, H, W]
//   bn.train(false);                                // now the running statistics
#pragma once

#include "mixp/nn/module.h"

namespace mixp::nn {

struct BatchNorm2dOptions {
  explicit BatchNorm2dOptions(int64_t num_features) : num_features(num_features) {}
  int64_t num_features;             ///< C
  double eps = 1e-5;                ///< added to the variance
  double momentum = 0.1;            ///< in [0, 1]; PyTorch's cumulative average is not offered
  bool affine = true;               ///< with weight and bias
  bool track_running_stats = true;  ///< without: batch statistics in evaluation mode too
};

class BatchNorm2d : public UnaryModule {
 public:
  explicit BatchNorm2d(const BatchNorm2dOptions& options);

  /// x [N, C, H, W] (or [N, C]) -> the same shape and dtype.
  Tensor forward(const Tensor& x) override;
  /// relu(forward(x)), the two in one op (ops::batch_norm_relu) when no hook is attached.
  Tensor forward_relu(const Tensor& x);
  /// max_pool2d(relu(forward(x)), 2, 2), the three in one op (ops::batch_norm_relu_max_pool2d)
  /// when no hook is attached; x [N, C, H, W].
  Tensor forward_relu_max_pool(const Tensor& x);
  void reset();

  const BatchNorm2dOptions& options() const { return options_; }
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }
  Tensor& running_mean() { return *running_mean_; }
  Tensor& running_var() { return *running_var_; }
  Tensor& num_batches_tracked() { return *num_batches_tracked_; }

 protected:
  bool is_norm() const override { return true; }
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;

 private:
  /// What runs after the normalization inside its op.
  enum class Fused : uint8_t { none, relu, relu_max_pool };
  /// The op (batch_norm, batch_norm_relu or batch_norm_relu_max_pool2d), and the count of
  /// batches; no hooks.
  Tensor run(const Tensor& x, Fused fused);
  BatchNorm2dOptions options_;
  Tensor none_;
  Tensor* weight_ = &none_;
  Tensor* bias_ = &none_;
  Tensor* running_mean_ = &none_;
  Tensor* running_var_ = &none_;
  Tensor* num_batches_tracked_ = &none_;
};

}  // namespace mixp::nn
