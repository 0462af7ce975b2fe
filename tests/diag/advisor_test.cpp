// diag::advise and the log2 histogram plot.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "mixp/diag/advisor.h"
#include "mixp/diag/svg.h"
#include "mixp/error.h"

namespace mixp::diag {
namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

LayerNumerics layer(const std::string& name, std::vector<double> activations,
                    std::vector<double> gradients, std::vector<double> weights) {
  const auto q = standard_queries();
  return {name, value_stats(activations, q), value_stats(gradients, q), value_stats(weights, q)};
}

TEST(DiagAdvisor, NamesUnderflowAtTheChosenScaleAndOverflowInBf16OrE4m3) {
  // "tiny": 3 of 4 activation gradients at 2^-30 (below fp16's 2^-25 at scale 1, fine at 2^10).
  // "hot": one activation of 1000 among four (E4M3's max is 448; bf16's is 3.4e38).
  // "calm": nothing to report.
  const std::vector<LayerNumerics> layers = {
      layer("tiny", {1, 2}, {0x1p-30, 0x1p-30, 0x1p-30, 1.0}, {0.5}),
      layer("hot", {1000, 1, 2, 3}, {1.0}, {0.1, 0.2}), layer("calm", {1, 2}, {0.5, 0.25}, {0.1})};
  const std::vector<Advice> at_one = advise(layers, 1.0);
  ASSERT_EQ(at_one.size(), 2u);
  EXPECT_EQ(at_one[0].layer, "tiny");
  EXPECT_EQ(at_one[0].rule, "fp16_underflow");
  EXPECT_DOUBLE_EQ(at_one[0].fraction, 0.75);
  EXPECT_NE(at_one[0].reason.find("75.00%"), std::string::npos) << at_one[0].reason;
  EXPECT_EQ(at_one[1].layer, "hot");
  EXPECT_EQ(at_one[1].rule, "e4m3_overflow");
  EXPECT_DOUBLE_EQ(at_one[1].fraction, 0.25);

  // At 2^10 the tiny gradients become 2^-20, subnormal but not zero in fp16.
  const std::vector<Advice> at_1024 = advise(layers, 1024.0);
  ASSERT_EQ(at_1024.size(), 1u);
  EXPECT_EQ(at_1024[0].layer, "hot");
  // A looser overflow limit lets "hot" pass; a strict underflow limit does not change "calm".
  EXPECT_TRUE(advise(layers, 1024.0, {.max_fp16_underflow = 0.0, .max_overflow = 0.25}).empty());
  EXPECT_THROW(advise(layers, 3.0), Error);
  EXPECT_THROW(advise(layers, 1.0, {.max_fp16_underflow = 2.0}), Error);
}

TEST(DiagAdvisor, OverflowFractionFallsBackToTheMaximum) {
  const TensorStats without_queries = value_stats(std::vector<double>{1.0, 500.0});
  EXPECT_EQ(overflow_fraction(without_queries, Format::e4m3()), 1.0);
  EXPECT_EQ(overflow_fraction(without_queries, Format::bf16()), 0.0);
  EXPECT_EQ(overflow_fraction(value_stats({}), Format::e4m3()), 0.0);
  const TensorStats with = value_stats(std::vector<double>{1.0, 500.0}, standard_queries());
  EXPECT_EQ(overflow_fraction(with, Format::e4m3()), 0.5);
}

TEST(DiagHistogramSvg, OneBarPerNonEmptyBinadeAndTheRangeMarked) {
  Log2Histogram h;
  h.title = "a <test>";
  h.exponents = {-30, -29, -10, 0};
  h.fractions = {0.25, 0.0, 0.5, 0.25};
  h.zero_fraction = 0.1;
  const std::string plain = log2_histogram_svg(h);
  EXPECT_EQ(count_of(plain, "<rect class=\"bar\""), 3u) << "the empty binade has no bar";
  EXPECT_EQ(count_of(plain, "<rect class=\"region\""), 4u);
  EXPECT_NE(plain.find("become zero in f16"), std::string::npos);
  EXPECT_NE(plain.find("f16 subnormals"), std::string::npos);
  EXPECT_NE(plain.find("a &lt;test&gt;"), std::string::npos);
  EXPECT_NE(plain.find("10.00% of the values are exactly zero"), std::string::npos);
  EXPECT_EQ(count_of(plain, "stroke-dasharray"), 0u);
  h.loss_scale = 65536.0;
  const std::string scaled = log2_histogram_svg(h);
  EXPECT_EQ(count_of(scaled, "stroke-dasharray"), 1u);
  EXPECT_NE(scaled.find("at loss scale 2^16"), std::string::npos);
  h.loss_scale = 3.0;
  EXPECT_THROW(log2_histogram_svg(h), Error);
  h.loss_scale = 1.0;
  h.fractions.pop_back();
  EXPECT_THROW(log2_histogram_svg(h), Error);
}

}  // namespace
}  // namespace mixp::diag
