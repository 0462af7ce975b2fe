// Devices: tensors allocated by a device's backend, explicit copies, and kernels chosen for the
// device of their tensors, shown with a device whose memory the host cannot touch.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <span>
#include <vector>

#include "kernels/elementwise_ops.h"
#include "kernels/registry.h"
#include "kernels/softmax.h"
#include "kernels/sum.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "support/protected_device.h"

namespace mixp {
namespace {

using testing::ProtectedDevice;

TEST(Device, TensorsLiveWhereTheirBackendPutsThem) {
  const Device dev = ProtectedDevice::device();
  EXPECT_STREQ(name_of(dev), "protected");
  const size_t before = ProtectedDevice::live_bytes();
  Philox generator(PhiloxState{7});
  const Tensor host = randn({3, 5}, generator);
  {
    const Tensor there = host.to(dev);
    EXPECT_EQ(there.device(), dev);
    EXPECT_GT(ProtectedDevice::live_bytes(), before);
    EXPECT_EQ(there.to_vector(), host.to_vector());  // through copy_to_host
    const Tensor half = there.to(DType::bf16);       // the backend's copy, on the device
    EXPECT_EQ(half.device(), dev);
    EXPECT_EQ(half.to(Device::cpu).to_vector(), host.to(DType::bf16).to_vector());
    Tensor filled = empty({4}, DType::f16, MemoryTag::activation, dev);
    filled.fill_(0.1);
    EXPECT_EQ(filled.to_vector(), full({4}, 0.1, DType::f16).to_vector());
  }
  EXPECT_EQ(ProtectedDevice::live_bytes(), before);  // freed by the backend
}

TEST(Device, OpsRefuseTensorsOnTwoDevices) {
  const Tensor there = ones({2, 3}).to(ProtectedDevice::device());
  Tensor out = empty({2, 3});
  try {
    kernels::softmax_lines(there, out, kernels::Lines{2, 3, 1}, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different devices, protected and cpu"),
              std::string::npos)
        << e.what();
  }
}

// A struct of tensors says its device with device(), as an optimizer's slot does.
struct TwoTensors {
  Tensor a, b;
  Device device() const { return a.device(); }
};
using GroupsFn = const char*(std::span<const Tensor> tensors, const std::vector<TwoTensors>& pairs);
const char* on_cpu(std::span<const Tensor>, const std::vector<TwoTensors>&) { return "cpu"; }
const char* on_protected(std::span<const Tensor>, const std::vector<TwoTensors>&) {
  return "protected";
}

TEST(Device, TheDeviceOfACallIncludesRangesAndStructsOfTensors) {
  const Device dev = ProtectedDevice::device();
  static kernels::Kernel<GroupsFn> kernel("groups",
                                          {{.name = "cpu", .fn = on_cpu, .fallback = true}});
  static const bool added = (kernel.add({.name = "protected", .device = dev, .fn = on_protected,
                                         .fallback = true}),
                             true);
  ASSERT_TRUE(added);
  const std::vector<Tensor> here = {zeros({1}), zeros({2})};
  const std::vector<Tensor> there = {zeros({1}).to(dev)};
  const std::vector<TwoTensors> pairs_here = {{zeros({1}), zeros({1})}};
  const std::vector<TwoTensors> pairs_there = {{zeros({1}).to(dev), Tensor()}};
  EXPECT_STREQ(kernel(here, pairs_here), "cpu");
  EXPECT_STREQ(kernel(there, pairs_there), "protected");
  EXPECT_STREQ(kernel({}, pairs_there), "protected");
  EXPECT_THROW(kernel(here, pairs_there), Error);
  EXPECT_THROW(kernel(there, pairs_here), Error);
}

TEST(Device, AnOpRunsOnANewDeviceThroughItsRegisteredKernel) {
  const Device dev = ProtectedDevice::device();
  ProtectedDevice::add_kernel<kernels::softmax_lines>();
  Philox generator(PhiloxState{3});
  const Tensor x = randn({4, 33}, generator);
  const Tensor y = ops::softmax(x.to(dev), -1);  // src/ops unchanged: the registry chose
  EXPECT_EQ(y.device(), dev);
  EXPECT_EQ(y.to_vector(), ops::softmax(x, -1).to_vector());
}

// relu and add, forward and backward, with no change to src/ops: the protected device only adds
// candidates to their kernels (and to sum's, which sums add's gradient back to a broadcast
// input's shape).
TEST(Device, ElementwiseOpsAndTheirGradientsRunOnANewDevice) {
  const Device dev = ProtectedDevice::device();
  static const bool added = [] {
    ProtectedDevice::add_kernel<kernels::relu_forward>();
    ProtectedDevice::add_kernel<kernels::relu_backward>();
    ProtectedDevice::add_kernel<kernels::add_forward>();
    ProtectedDevice::add_kernel<kernels::sum_lines>();
    return true;
  }();
  ASSERT_TRUE(added);
  Philox generator(PhiloxState{5});
  const Tensor x_host = randn({3, 37}, generator, 1.0, DType::bf16);
  const Tensor b_host = randn({37}, generator, 1.0, DType::bf16);
  const Tensor g_host = randn({3, 37}, generator, 1.0, DType::bf16);

  const Tensor x = x_host.to(dev).set_requires_grad(true);
  const Tensor b = b_host.to(dev).set_requires_grad(true);
  const Tensor y = ops::add(ops::relu(x), b);
  EXPECT_EQ(y.device(), dev);
  y.backward(g_host.to(dev));
  ASSERT_TRUE(x.grad().defined() && b.grad().defined());
  EXPECT_EQ(x.grad().device(), dev);
  EXPECT_EQ(b.grad().device(), dev);

  const Tensor xh = x_host.detach().set_requires_grad(true);
  const Tensor bh = b_host.detach().set_requires_grad(true);
  const Tensor yh = ops::add(ops::relu(xh), bh);
  yh.backward(g_host);
  EXPECT_EQ(y.detach().to_vector(), yh.detach().to_vector());
  EXPECT_EQ(x.grad().to_vector(), xh.grad().to_vector());
  EXPECT_EQ(b.grad().to_vector(), bh.grad().to_vector());
}

TEST(DeviceDeathTest, TheHostCannotTouchTheProtectedMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor there = ones({8}).to(ProtectedDevice::device());
  EXPECT_DEATH(
      {
        volatile float v = there.data<float>()[0];
        (void)v;
      },
      "");
}

TEST(Device, AnUnregisteredDeviceIsNamedInTheError) {
  try {
    empty({2}, DType::f32, MemoryTag::activation, Device::cuda);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA backend"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixp
