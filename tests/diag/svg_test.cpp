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
