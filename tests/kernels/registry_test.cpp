// The kernel registry's choice: device, ISA, reference mode and predicates, and the shape of
// every kernel's CPU list.
#include "kernels/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "mixp/error.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

using WhichFn = const char*(const Tensor& t, int64_t n);

const char* run_avx512(const Tensor&, int64_t) { return "avx512"; }
const char* run_wide(const Tensor&, int64_t) { return "wide"; }
const char* run_scalar(const Tensor&, int64_t) { return "scalar"; }
bool at_least_64(const Tensor&, const int64_t& n) { return n >= 64; }

Kernel<WhichFn>& which() {
  static Kernel<WhichFn> kernel(
      "which", {{.name = "avx512", .isa = Isa::avx512, .fn = run_avx512},
                {.name = "wide", .applies = at_least_64, .fn = run_wide},
                {.name = "scalar", .fn = run_scalar, .fallback = true}});
  return kernel;
}

TEST(KernelRegistry, RunsTheFirstCandidateThatApplies) {
  const Tensor t = zeros({2});
  if (best_isa() >= Isa::avx512) {
    EXPECT_STREQ(which()(t, 100), "avx512");
  }
  IsaLimit only_avx2(Isa::avx2);
  EXPECT_STREQ(which()(t, 100), "wide");
  EXPECT_STREQ(which()(t, 10), "scalar");  // the predicate refuses
  EXPECT_STREQ(which().select(t, 100).name, "wide");
}

TEST(KernelRegistry, ReferenceModeChoosesTheFallback) {
  const Tensor t = zeros({2});
  ReferenceMode reference;
  EXPECT_STREQ(which()(t, 100), "scalar");
}

const char* run_other_device(const Tensor&, int64_t) { return "other"; }

TEST(KernelRegistry, ADeviceAddsItsOwnCandidates) {
  // A Tensor on another device: its storage is never touched here, only its device read.
  constexpr Device other = static_cast<Device>(200);
  // Static, as every kernel of these tests: all_kernels() keeps a pointer to each for good.
  static Kernel<WhichFn> kernel("which_on_two_devices",
                                {{.name = "scalar", .fn = run_scalar, .fallback = true}});
  EXPECT_STREQ(kernel(zeros({1}), 1), "scalar");
  kernel.add({.name = "other", .device = other, .fn = run_other_device, .fallback = true});
  EXPECT_STREQ(kernel(zeros({1}), 1), "scalar");
  EXPECT_EQ(kernel.entries().back().device, other);
}

using TwoFn = void(const Tensor& a, const Tensor& b);
void nothing(const Tensor&, const Tensor&) {}

TEST(KernelRegistry, NamesTheKernelWhenNothingApplies) {
  static Kernel<WhichFn> kernel("only_wide",
                                {{.name = "wide", .applies = at_least_64, .fn = run_wide}});
  try {
    kernel(zeros({1}), 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only_wide: no kernel for device cpu"), std::string::npos)
        << e.what();
  }
  static Kernel<TwoFn> two("two", {{.name = "scalar", .fn = nothing, .fallback = true}});
  EXPECT_NO_THROW(two(zeros({1}), Tensor()));  // an undefined tensor has no device
}

// Every kernel of the library: its CPU candidates end with exactly one fallback, which needs
// no more than scalar code and applies to every call, so that reference mode and the plainest
// machine always find one.
TEST(KernelRegistry, EveryKernelEndsItsCpuListWithOneFallback) {
  ASSERT_FALSE(all_kernels().empty());
  std::set<std::string> names;
  for (const KernelInfo* kernel : all_kernels()) {
    if (std::string(kernel->name()).starts_with("which") ||
        std::string(kernel->name()).starts_with("only_") || kernel->name() == std::string("two"))
      continue;  // this file's own
    EXPECT_TRUE(names.insert(kernel->name()).second) << "declared twice: " << kernel->name();
    std::vector<KernelInfo::Entry> cpu;
    for (const auto& e : kernel->entries())
      if (e.device == Device::cpu) cpu.push_back(e);
    ASSERT_FALSE(cpu.empty()) << kernel->name();
    int fallbacks = 0;
    for (const auto& e : cpu) fallbacks += e.fallback;
    EXPECT_EQ(fallbacks, 1) << kernel->name();
    EXPECT_TRUE(cpu.back().fallback) << kernel->name();
    EXPECT_EQ(cpu.back().isa, Isa::scalar) << kernel->name();
    EXPECT_FALSE(cpu.back().has_predicate) << kernel->name();
  }
}

}  // namespace
}  // namespace mixp::kernels
