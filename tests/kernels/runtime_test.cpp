#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "mixp/error.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"

namespace mixp {
namespace {

TEST(Runtime, OpenMPWorkersSleepWhenIdle) {
  // Set by libmixp_openmp_env before libgomp read its environment, unless the user chose.
  if (!openmp_spin_limited()) GTEST_SKIP() << "the environment already sets the OpenMP wait policy";
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  ASSERT_NE(spin, nullptr);
  EXPECT_EQ(std::string(spin), "0");
  // What libgomp itself parsed: it prints its settings with OMP_DISPLAY_ENV, so run a child.
  const std::string command =
      std::string("OMP_DISPLAY_ENV=verbose '") + MIXP_KERNELS_TEST_PATH +
      "' --gtest_filter=Runtime.ThreadCountIsChecked 2>&1 | grep -q \"GOMP_SPINCOUNT = '" + spin +
      "'\"";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(Runtime, ReferenceModeIsAScopedPerThreadSwitch) {
  const bool from_environment = reference_mode();
  {
    ReferenceMode reference;
    EXPECT_TRUE(reference_mode());
    {
      ReferenceMode nested;
      EXPECT_TRUE(reference_mode());
    }
    EXPECT_TRUE(reference_mode());
    bool other_thread = true;
    std::thread([&] { other_thread = reference_mode(); }).join();
    EXPECT_EQ(other_thread, from_environment);
  }
  EXPECT_EQ(reference_mode(), from_environment);
}

TEST(Runtime, ThreadCountIsChecked) {
  const int before = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(before);
  EXPECT_THROW(set_num_threads(0), Error);
}

TEST(Runtime, ResultsDoNotDependOnTheThreadCount) {
  Philox rng(PhiloxState{4, 0, 0});
  const Tensor x = randn({300, 517}, rng);
  const int before = num_threads();
  set_num_threads(1);
  const std::vector<double> one = ops::sum(ops::exp(x), {1}).to_vector();
  const double total_one = ops::sum(x).item();
  set_num_threads(std::max(2, before));
  const std::vector<double> many = ops::sum(ops::exp(x), {1}).to_vector();
  const double total_many = ops::sum(x).item();
  set_num_threads(before);
  EXPECT_EQ(one, many);
  EXPECT_EQ(total_one, total_many);
}

}  // namespace
}  // namespace mixp
