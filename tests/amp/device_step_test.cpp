// A new backend only adds files: the mlp's training step under amp-bf16 with the GradScaler and
// AdamW, on the test-only device whose memory the host cannot touch (support/protected_device.h).
// The device adds its candidates to the kernels the step calls; src/ops, src/optim and src/amp
// run unchanged, and the step gives the cpu's bits.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "kernels/amp_unscale.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise_ops.h"
#include "kernels/gemm_product.h"
#include "kernels/linear_grads.h"
#include "kernels/sum.h"
#include "kernels/weight_update.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/amp/presets.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/optim/adamw.h"
#include "support/protected_device.h"

namespace mixp {
namespace {

using testing::ProtectedDevice;

void add_the_steps_kernels() {
  static const bool added = [] {
    ProtectedDevice::add_kernel<kernels::gemm_product>();
    ProtectedDevice::add_kernel<kernels::linear_weight_grads>();
    ProtectedDevice::add_kernel<kernels::linear_grads>();
    ProtectedDevice::add_kernel<kernels::sum_lines>();
    ProtectedDevice::add_kernel<kernels::cross_entropy>();
    ProtectedDevice::add_kernel<kernels::cross_entropy_backward>();
    ProtectedDevice::add_kernel<kernels::cross_entropy_check_targets>();
    ProtectedDevice::add_kernel<kernels::relu_forward>();
    ProtectedDevice::add_kernel<kernels::relu_backward>();
    ProtectedDevice::add_kernel<kernels::mul_scalar_forward>();
    ProtectedDevice::add_kernel<kernels::mul_scalar_backward>();
    ProtectedDevice::add_kernel<kernels::add_forward>();
    ProtectedDevice::add_kernel<kernels::unscale_and_check>();
    ProtectedDevice::add_kernel<kernels::adam_update>();
    return true;
  }();
  ASSERT_TRUE(added);
}

struct StepResult {
  std::vector<double> losses;
  std::vector<std::vector<double>> initial, parameters;
  float scale = 0.0f;
};

// Two amp-bf16 steps of the mlp with a GradScaler (initial scale 2^10) and AdamW, on `device`;
// with `poisoned`, one pixel of every batch is NaN.
StepResult train_two_steps(Device device, bool poisoned = false) {
  const nn::ModelConfig config{.name = "mlp", .classes = 10, .image_size = 8};
  std::unique_ptr<nn::Model> model = nn::make_model(config, /*seed=*/5);
  std::vector<Tensor> moved;
  for (const Tensor& p : model->parameters()) moved.push_back(p.to(device));
  nn::replace_parameters(*model, moved);

  const amp::Preset& preset = amp::preset("amp-bf16");
  optim::AdamW optimizer(model->parameters(),
                         {.lr = 1e-3, .weight_decay = 0.01, .precision = preset.optimizer_precision});
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 1024.0});
  Philox data(PhiloxState{.seed = 11});
  StepResult result;
  for (const Tensor& p : model->parameters()) result.initial.push_back(p.to_vector());
  for (int step = 0; step < 2; ++step) {
    std::vector<double> pixels = randn({4, 1, 8, 8}, data).to_vector();
    if (poisoned) pixels[37] = std::numeric_limits<double>::quiet_NaN();
    const Tensor images = from_values(pixels, {4, 1, 8, 8}).to(device);
    const Tensor labels = from_values({1, 7, 3, 9}, {4}, DType::i64).to(device);
    Tensor loss;
    {
      amp::Autocast scope = preset.autocast();
      loss = ops::cross_entropy(model->forward(images), labels);
    }
    EXPECT_EQ(loss.device(), device);
    scaler.scale(loss).backward();
    scaler.step(optimizer);
    scaler.update();
    optimizer.zero_grad();
    result.losses.push_back(loss.item());
  }
  for (const Tensor& p : model->parameters()) {
    EXPECT_EQ(p.device(), device);
    result.parameters.push_back(p.to_vector());
  }
  result.scale = scaler.get_scale();
  return result;
}

void expect_same_run(const StepResult& there, const StepResult& on_cpu) {
  EXPECT_EQ(there.losses, on_cpu.losses);
  EXPECT_EQ(there.scale, on_cpu.scale);
  ASSERT_EQ(there.parameters.size(), on_cpu.parameters.size());
  for (size_t i = 0; i < on_cpu.parameters.size(); ++i) {
    EXPECT_EQ(there.parameters[i], on_cpu.parameters[i]) << "parameter " << i;
  }
}

TEST(ProtectedDeviceStep, TheMlpTrainsUnderAmpBf16WithTheGradScalerAndGivesTheCpusBits) {
  add_the_steps_kernels();
  const StepResult on_cpu = train_two_steps(Device::cpu);
  const StepResult there = train_two_steps(ProtectedDevice::device());
  expect_same_run(there, on_cpu);
  EXPECT_NE(on_cpu.losses[0], on_cpu.losses[1]);  // the steps changed the model
  EXPECT_NE(on_cpu.parameters, on_cpu.initial);
  EXPECT_EQ(on_cpu.scale, 1024.0f);  // no overflow, and too few steps to grow
}

TEST(ProtectedDeviceStep, NonFiniteGradientsSkipTheStepsThereAsOnTheCpu) {
  add_the_steps_kernels();
  // A NaN pixel makes gradients NaN; the unscale kernel finds them on the device, and both
  // steps are skipped, halving the scale each time.
  const StepResult on_cpu = train_two_steps(Device::cpu, /*poisoned=*/true);
  const StepResult there = train_two_steps(ProtectedDevice::device(), /*poisoned=*/true);
  EXPECT_EQ(there.scale, on_cpu.scale);
  EXPECT_EQ(there.parameters, there.initial);
  EXPECT_EQ(on_cpu.parameters, on_cpu.initial);
  EXPECT_EQ(there.scale, 256.0f);
}

}  // namespace
}  // namespace mixp
