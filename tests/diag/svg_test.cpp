// SVG line plots: well-formed, one <path> per curve, ticks that cover the data.
#include "mixp/diag/svg.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "mixp/error.h"
#include "support/xml_check.h"

namespace mixp {
namespace {

TEST(Svg, PlotIsWellFormedWithOnePathPerCurve) {
  for (int n : {0, 1, 3, 12}) {
    std::vector<diag::Curve> curves;
    for (int c = 0; c < n; ++c) {
      diag::Curve curve{.label = "curve <" + std::to_string(c) + "> & co"};
      for (int i = 0; i < 50; ++i) {
        curve.x.push_back(i * 10.0);
        curve.y.push_back(std::exp(-0.05 * i) * (c + 1));
      }
      curves.push_back(curve);
    }
    const std::string svg = diag::line_plot_svg(
        curves, {.title = "loss & \"more\"", .x_label = "step", .y_label = "y"});
    const test::XmlCheck x = test::check_xml(svg);
    ASSERT_TRUE(x.ok) << x.error;
    EXPECT_EQ(x.root, "svg");
    EXPECT_EQ(x.elements.count("path") ? x.elements.at("path") : 0, n);
    EXPECT_GE(x.elements.at("text"), 4 + n);  // title, axis labels, ticks, legend
  }
}

TEST(Svg, NonFinitePointsBreakTheLine) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  diag::Curve c{.label = "c", .x = {0, 1, 2, 3, 4}, .y = {1, 2, nan, 3, 4}};
  const std::string svg = diag::line_plot_svg({c}, {});
  ASSERT_TRUE(test::check_xml(svg).ok);
  const size_t d = svg.find(" d=\"");
  ASSERT_NE(d, std::string::npos);
  const std::string path = svg.substr(d, svg.find('"', d + 4) - d);
  EXPECT_EQ(std::count(path.begin(), path.end(), 'M'), 2);
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 2);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Svg, MarkersShowEveryFinitePointAndSpansTheirKind) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const diag::Curve train{.label = "train", .x = {1, 2, 3, 4}, .y = {3, 2, nan, 1}};
  const diag::Curve eval{.label = "eval", .x = {2, 4, 6}, .y = {2.5, nan, 1.5}, .markers = true};
  const std::string svg = diag::line_plot_svg(
      {train, eval},
      {.spans = {
           {.kind = diag::SpanKind::skipped_steps, .from = 2, .to = 4, .label = "2 <skipped>"},
           {.kind = diag::SpanKind::skipped_steps, .from = 4, .to = 5, .label = "1"}}});
  const test::XmlCheck x = test::check_xml(svg);
  ASSERT_TRUE(x.ok) << x.error;
  EXPECT_EQ(x.elements.at("path"), 2);
  EXPECT_EQ(count(svg, "<circle class=\"marker\""), 2u);  // the evaluation's finite points
  EXPECT_EQ(count(svg, "<circle class=\"point\""), 1u);   // train's last, alone after a NaN
  EXPECT_EQ(x.elements.at("circle"), 3);
  EXPECT_EQ(count(svg, "<rect class=\"skipped-steps\""), 2u);
  EXPECT_EQ(count(svg, "<rect class=\"nonfinite-loss\""), 0u);
  EXPECT_EQ(count(svg, ">skipped steps</text>"), 1u);  // one legend entry per kind shown
  EXPECT_EQ(count(svg, ">non-finite loss</text>"), 0u);
  EXPECT_NE(svg.find("2 &lt;skipped&gt;"), std::string::npos);
}

TEST(Svg, ALogScaleLeavesOutValuesThatAreNotPositive) {
  const diag::Curve c{.label = "c", .x = {0, 1, 2, 3}, .y = {1, 10, 0, 1000}};
  EXPECT_TRUE(diag::spans_decades({c}));
  EXPECT_FALSE(diag::spans_decades({c}, 3.0));
  EXPECT_FALSE(diag::spans_decades({{.label = "flat", .x = {0, 1}, .y = {2, 150}}}));
  const std::string svg = diag::line_plot_svg({c}, {.log_y = true});
  ASSERT_TRUE(test::check_xml(svg).ok);
  const size_t d = svg.find(" d=\"");
  const std::string path = svg.substr(d, svg.find('"', d + 4) - d);
  EXPECT_EQ(std::count(path.begin(), path.end(), 'M'), 2);  // broken at the zero
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 1);
  EXPECT_NE(svg.find(">1000</text>"), std::string::npos);  // ticks labelled as values
}

TEST(Svg, BarChartHasABarPerSeriesAndCategory) {
  const std::vector<std::string> categories = {"parameter", "gradient", "activation <all>"};
  const std::string svg = diag::bar_chart_svg(
      categories, {{.label = "fp32", .values = {4, 4, 10}}, {.label = "bf16", .values = {2, 2, 0}}},
      {.title = "memory", .x_label = "MiB", .height = 100});
  const test::XmlCheck x = test::check_xml(svg);
  ASSERT_TRUE(x.ok) << x.error;
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 6u);
  EXPECT_NE(svg.find("bf16, gradient: 2 MiB"), std::string::npos);
  // The height grows to fit every bar: 3 groups of 2 bars.
  const size_t h = svg.find("height=\"");
  EXPECT_GE(std::stoi(svg.substr(h + 8)), 3 * 2 * 12);
  EXPECT_THROW(diag::bar_chart_svg(categories, {{.label = "short", .values = {1}}}, {}), Error);
  EXPECT_THROW(diag::bar_chart_svg(categories, {{.label = "neg", .values = {1, -1, 1}}}, {}),
               Error);
}

TEST(Svg, MismatchedCurveIsAnError) {
  EXPECT_THROW(diag::line_plot_svg({{.label = "c", .x = {1, 2}, .y = {1}}}, {}), Error);
  EXPECT_THROW(diag::line_plot_svg({}, {.width = 10, .height = 10}), Error);
}

TEST(Svg, NiceTicksCoverTheRangeInRoundSteps) {
  const std::vector<double> t = diag::nice_ticks(0.0, 937.0);
  ASSERT_GE(t.size(), 3u);
  EXPECT_EQ(t.front(), 0.0);
  EXPECT_GE(t.back(), 800.0);
  const double step = t[1] - t[0];
  EXPECT_EQ(step, 200.0);
  const std::vector<double> small = diag::nice_ticks(0.231, 0.29);
  for (double v : small) EXPECT_TRUE(v >= 0.231 - 1e-12 && v <= 0.29 + 1e-12) << v;
  EXPECT_THROW(diag::nice_ticks(1.0, 1.0), Error);
}

}  // namespace
}  // namespace mixp
