// mixp/diag/svg.h — line plots as standalone SVG files, viewable in any browser.
//
// One plot: a frame with x and y axes, "nice" ticks (1, 2 or 5 times a power of ten) with
// labels, a title, axis labels, one polyline per curve and a legend. Every curve is exactly one
// <path> element and nothing else in the file is a <path> (axes, ticks and legend swatches are
// <line>s), so a reader can count the curves. Non-finite points break a curve's line (the path
// moves on to the next finite point) and do not affect the axis ranges. A curve with markers
// also has a <circle class="marker"> at each finite point (evaluations: each one shows); on
// one without, a finite point with no finite neighbour is a <circle class="point">, since no
// line passes through it.
// Spans shade ranges of x behind the curves, each a <rect> whose class names its kind
// ("skipped-steps", "nonfinite-loss"), with a legend entry per kind shown.
//
// A bar chart: horizontal bars, a group per category and a bar (<rect class="bar">) per series
// in each, on a value axis from 0 (memory by tag, one series per run).
//
// And the histogram of log2 magnitudes in the form of Micikevicius et al. 2018, Fig. 3: one bar
// per binade [2^e, 2^(e+1)) (its height the fraction of the non-zero values in it), over shaded
// regions of a format's range: the values that become zero (|x| <= s/2, the smallest subnormal
// halved), the subnormals, the normal range and the overflow; with a loss scale 2^k, dashed lines
// where those bounds move (to 2^-k times them: a scale shifts the values right by k binades).
// Every bar is one <rect class="bar">.
//
// Example:
//
//   mixp::diag::Curve train{.label = "train", .x = {1, 2, 3}, .y = {2.3, 1.1, 0.7}};
//   mixp::diag::Curve eval{.label = "eval", .x = {3}, .y = {0.9}, .markers = true};
//   mixp::diag::write_line_plot(
//       "loss.svg", {train, eval},
//       {.title = "loss", .x_label = "step", .y_label = "loss",
//        .spans = {{.kind = mixp::diag::SpanKind::skipped_steps, .from = 1, .to = 2,
//                   .label = "1 step skipped"}}});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixp/format.h"

namespace mixp::diag {

struct Curve {
  std::string label{};
  std::vector<double> x{}, y{};  ///< the same length
  bool markers = false;          ///< a circle at every finite point, besides the line
};

/// What a span of x marks. Append-only: the values name CSS classes readers may look for.
enum class SpanKind : uint8_t {
  skipped_steps = 0,   ///< steps without an update ("skipped-steps")
  nonfinite_loss = 1,  ///< steps whose loss was a NaN or an infinity ("nonfinite-loss")
};

struct Span {
  SpanKind kind = SpanKind::skipped_steps;
  double from = 0.0, to = 0.0;  ///< the x range; at least 3 pixels wide when drawn
  std::string label{};          ///< its tooltip
};

struct PlotOptions {
  std::string title{};
  std::string x_label{};
  std::string y_label{};
  int width = 800;            ///< pixels
  int height = 500;           ///< pixels
  std::vector<Span> spans{};  ///< shaded behind the curves; they widen the x range to fit
  bool log_y = false;         ///< a log10 y axis, on which values <= 0 are left out like NaNs
};

/// Whether the positive finite y values of `curves` span more than `decades` powers of ten: a
/// plot of them reads better with log_y.
bool spans_decades(const std::vector<Curve>& curves, double decades = 2.0);

/// One series of a bar chart: a value per category.
struct BarSeries {
  std::string label{};
  std::vector<double> values{};
};

/// The SVG text of the plot. Throws mixp::Error when a curve's x and y differ in length.
std::string line_plot_svg(const std::vector<Curve>& curves, const PlotOptions& options);

/// `text` with &, <, >, " and ' as XML entities, for text and attributes of SVG and HTML.
std::string escape_xml(const std::string& text);
/// Writes line_plot_svg(...) to `path` atomically.
void write_line_plot(const std::string& path, const std::vector<Curve>& curves,
                     const PlotOptions& options);

/// The SVG text of a bar chart: per category, one horizontal bar per series, with the value
/// in `value_label`'s unit (ticks and tooltips). Throws mixp::Error when a series has not one
/// value per category or a value is negative or not finite. options.height is a minimum: the
/// chart grows to give every bar 12 pixels.
std::string bar_chart_svg(const std::vector<std::string>& categories,
                          const std::vector<BarSeries>& series, const PlotOptions& options);

struct Log2Histogram {
  std::string title{};
  std::vector<int> exponents{};     ///< the binade of each bar, ascending
  std::vector<double> fractions{};  ///< of the non-zero values, one per bar
  double zero_fraction = 0.0;       ///< of all values: exact zeros (shown in the caption)
  Format format = Format::fp16();   ///< whose range is marked
  double loss_scale = 1.0;          ///< a power of two; 1: no dashed lines
};

/// The SVG text of the histogram plot. Throws mixp::Error when the lengths differ, a fraction
/// is negative, or loss_scale is not a power of two.
std::string log2_histogram_svg(const Log2Histogram& histogram, int width = 900, int height = 480);
void write_log2_histogram(const std::string& path, const Log2Histogram& histogram);

/// "Nice" tick positions covering [low, high]: about `target` of them, each a multiple of 1, 2
/// or 5 times a power of ten.
std::vector<double> nice_ticks(double low, double high, int target = 6);

}  // namespace mixp::diag
