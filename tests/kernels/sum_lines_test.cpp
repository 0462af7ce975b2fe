// sum_lines' choice (kernels/sum.h): the candidates that split one line over the threads take
// a few long lines only, the lines split over the threads take the rest, and reference mode
// takes the fallback. ops_test holds each of them to the fallback's sums.
#include <gtest/gtest.h>

#include "kernels/sum.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

const char* chosen(Lines lines) {
  const Tensor x = zeros({lines.outer * lines.n * lines.inner});
  Tensor out = empty({lines.outer * lines.inner});
  return sum_lines.select(x, lines, 1.0, out).name;
}

TEST(SumLines, SplitsOneLineOverTheThreadsOnlyForAFewLongOnes) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 forces the fallback everywhere";
  EXPECT_STREQ(chosen({.outer = 3, .n = 70001, .inner = 1}), "long_rows");
  EXPECT_STREQ(chosen({.outer = 4, .n = 70001, .inner = 1}), "openmp");
  EXPECT_STREQ(chosen({.outer = 3, .n = 65536, .inner = 1}), "openmp");
  EXPECT_STREQ(chosen({.outer = 1, .n = 120, .inner = 601}), "wide_slices");
  EXPECT_STREQ(chosen({.outer = 1, .n = 100, .inner = 601}), "openmp");
  EXPECT_STREQ(chosen({.outer = 4, .n = 120, .inner = 601}), "openmp");
}

TEST(SumLines, ReferenceModeChoosesTheFallback) {
  ReferenceMode reference;
  EXPECT_STREQ(chosen({.outer = 3, .n = 70001, .inner = 1}), "scalar");
  EXPECT_STREQ(chosen({.outer = 1, .n = 120, .inner = 601}), "scalar");
  EXPECT_STREQ(chosen({.outer = 5, .n = 7, .inner = 3}), "scalar");
}

}  // namespace
}  // namespace mixp::kernels
