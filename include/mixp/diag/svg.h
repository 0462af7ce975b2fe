// mixp/diag/svg.h — line plots as standalone SVG files, viewable in any browser.
//
// One plot: a frame with x and y axes, "nice" ticks (1, 2 or 5 times a power of ten) with
// labels, a title, axis labels, one polyline per curve and a legend. Every curve is exactly one
// <path> element and nothing else in the file is a <path> (axes, ticks and legend swatches are
// <line>s), so a reader can count the curves. Non-finite points break a curve's line (the path
// moves on to the next finite point) and do not affect the axis ranges.
//
// Example:
//
//   mixp::diag::Curve train{.label = "train", .x = {1, 2, 3}, .y = {2.3, 1.1, 0.7}};
//   mixp::diag::write_line_plot("loss.svg", {train},
//                               {.title = "loss", .x_label = "step", .y_label = "loss"});
#pragma once

#include <string>
#include <vector>

namespace mixp::diag {

struct Curve {
  std::string label{};
  std::vector<double> x{}, y{};  ///< the same length
};

struct PlotOptions {
  std::string title{};
  std::string x_label{};
  std::string y_label{};
  int width = 800;   ///< pixels
  int height = 500;  ///< pixels
};

/// The SVG text of the plot. Throws mixp::Error when a curve's x and y differ in length.
std::string line_plot_svg(const std::vector<Curve>& curves, const PlotOptions& options);
/// Writes line_plot_svg(...) to `path` atomically.
void write_line_plot(const std::string& path, const std::vector<Curve>& curves,
                     const PlotOptions& options);

/// "Nice" tick positions covering [low, high]: about `target` of them, each a multiple of 1, 2
/// or 5 times a power of ten.
std::vector<double> nice_ticks(double low, double high, int target = 6);

}  // namespace mixp::diag
