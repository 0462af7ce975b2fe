// The optimizers on a new device: the test-only device (tests/support/protected_device.h), whose
// memory faults outside its own kernels, adds candidates to the update kernels and nothing else,
// and Sgd, Adam, AdamW and clip_grad_norm run there with the CPU's bits.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/grad_norm.h"
#include "kernels/master_split.h"
#include "kernels/weight_update.h"
#include "mixp/autograd.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/clip_grad.h"
#include "mixp/optim/sgd.h"
#include "support/protected_device.h"

namespace mixp {
namespace {

using testing::ProtectedDevice;

Device protected_device() {
  static const bool added = [] {
    ProtectedDevice::add_kernel<kernels::adam_update>();
    ProtectedDevice::add_kernel<kernels::sgd_update>();
    ProtectedDevice::add_kernel<kernels::join_bf16_master>();
    ProtectedDevice::add_kernel<kernels::grad_chunk_squares>();
    ProtectedDevice::add_kernel<kernels::scale_gradient>();
    return true;
  }();
  EXPECT_TRUE(added);
  return ProtectedDevice::device();
}

std::vector<uint8_t> host_bytes(const Tensor& t) {
  if (!t.defined()) return {};
  const Tensor here = t.to(Device::cpu);
  const auto* p = static_cast<const uint8_t*>(here.raw_data());
  return {p, p + here.nbytes()};
}

std::vector<Tensor> parameters(DType dtype, Device device) {
  std::vector<Tensor> ps;
  uint64_t seed = 1;
  for (int64_t n : {int64_t(37), int64_t(40000)}) {
    Philox generator(PhiloxState{seed++});
    Tensor p = randn({n}, generator).to(dtype).to(device);
    p.set_requires_grad(true);
    ps.push_back(p);
  }
  return ps;
}

void set_gradients(std::vector<Tensor>& ps, int step) {
  uint64_t seed = 100 + 10 * uint64_t(step);
  for (Tensor& p : ps) {
    Philox generator(PhiloxState{seed++});
    p.set_grad(randn(p.shape(), generator, 0.1).to(p.device()));
  }
}

using MakeOptimizer =
    std::unique_ptr<optim::MasterWeightOptimizer> (*)(std::vector<Tensor>, optim::Precision);

// Two steps with clipping on `device`: every parameter's bytes and its master's.
std::vector<std::vector<uint8_t>> train(Device device, DType dtype, optim::Precision precision,
                                        MakeOptimizer make) {
  std::vector<Tensor> ps = parameters(dtype, device);
  EXPECT_EQ(ps[0].device(), device);
  std::unique_ptr<optim::MasterWeightOptimizer> opt = make(ps, precision);
  for (int step = 0; step < 2; ++step) {
    set_gradients(ps, step);
    optim::clip_grad_norm(ps, 1.0);
    opt->step();
  }
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < ps.size(); ++i) {
    out.push_back(host_bytes(ps[i]));
    out.push_back(host_bytes(opt->master(i)));
    out.push_back(host_bytes(opt->compensation(i)));
  }
  return out;
}

std::unique_ptr<optim::MasterWeightOptimizer> sgd(std::vector<Tensor> ps, optim::Precision p) {
  return std::make_unique<optim::Sgd>(
      ps, optim::SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true,
                            .precision = p, .rounding = PhiloxState{7}});
}
std::unique_ptr<optim::MasterWeightOptimizer> adam(std::vector<Tensor> ps, optim::Precision p) {
  return std::make_unique<optim::Adam>(
      ps, optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.01, .precision = p,
                             .rounding = PhiloxState{7}, .state_dtype = DType::bf16});
}
std::unique_ptr<optim::MasterWeightOptimizer> adamw(std::vector<Tensor> ps, optim::Precision p) {
  return std::make_unique<optim::AdamW>(
      ps, optim::AdamWOptions{.lr = 1e-2, .precision = p, .rounding = PhiloxState{7}});
}

TEST(OptimizerOnADevice, RunsThroughTheDevicesCandidatesWithTheCpusBits) {
  const Device dev = protected_device();
  struct Case {
    DType dtype;
    optim::Precision precision;
  };
  const Case cases[] = {{DType::f32, optim::Precision::master_fp32},
                        {DType::bf16, optim::Precision::master_fp32},
                        {DType::bf16, optim::Precision::stochastic_rounding},
                        {DType::bf16, optim::Precision::kahan},
                        {DType::f16, optim::Precision::master_fp32}};
  const std::pair<const char*, MakeOptimizer> optimizers[] = {
      {"Sgd", sgd}, {"Adam", adam}, {"AdamW", adamw}};
  for (const Case& c : cases) {
    for (const auto& [name, make] : optimizers) {
      const auto here = train(Device::cpu, c.dtype, c.precision, make);
      const auto there = train(dev, c.dtype, c.precision, make);
      EXPECT_TRUE(here == there) << name << " " << name_of(c.dtype) << " "
                                 << optim::name_of(c.precision);
    }
  }
}

}  // namespace
}  // namespace mixp
