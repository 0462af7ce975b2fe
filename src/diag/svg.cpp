// SVG line plots: plain text, fixed colours, no dependencies.
#include "mixp/diag/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "mixp/error.h"
#include "mixp/io/safetensors.h"

namespace mixp::diag {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  if (v == 0.0) return "0";
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  void settle() {
    if (!(low <= high)) low = 0.0, high = 1.0;
    if (low == high) {
      const double pad = low == 0.0 ? 1.0 : std::fabs(low) * 0.05;
      low -= pad, high += pad;
    }
  }
};

}  // namespace

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high, int target) {
  MIXP_CHECK(std::isfinite(low) && std::isfinite(high) && low < high && target >= 1,
             "nice_ticks: needs finite low < high and target >= 1, got ", low, ", ", high, ", ",
             target);
  const double raw = (high - low) / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

namespace {

// Where a plot's data goes in pixels: the frame inside the margins, over the data's ranges.
struct Frame {
  double left = 80, right = 180, top = 40, bottom = 60;
  double w = 0, h = 0;
  Range xr, yr;
  bool log_y = false;  // yr, py() and the y ticks are in log10 units
  double px(double x) const { return left + (x - xr.low) / (xr.high - xr.low) * w; }
  double py(double y) const { return top + h - (y - yr.low) / (yr.high - yr.low) * h; }
  // A data value on the y scale: its log10 on a log scale, where values <= 0 have no place.
  double fy(double y) const {
    if (!log_y) return y;
    return y > 0 ? std::log10(y) : std::numeric_limits<double>::quiet_NaN();
  }
  std::string y_tick_label(double t) const { return tick_label(log_y ? std::pow(10.0, t) : t); }
};

std::string svg_open(int width, int height) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n" + "<rect x=\"0\" y=\"0\" width=\"" +
         w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
}

std::string line_svg(double x1, double y1, double x2, double y2) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\"/>\n";
}

// Grid, axes, ticks, tick labels, the title and the axis labels.
std::string axes_svg(const Frame& f, const std::vector<double>& xt, const std::vector<double>& yt,
                     const PlotOptions& options) {
  auto y_shown = [&](double t) { return t >= f.yr.low && t <= f.yr.high; };
  std::string s = "<text x=\"" + num(f.left + f.w / 2) +
                  "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" +
                  escape_xml(options.title) + "</text>\n";
  s += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double t : yt)
    if (y_shown(t)) s += line_svg(f.left, f.py(t), f.left + f.w, f.py(t));
  s += "</g>\n<g stroke=\"black\" stroke-width=\"1\">\n";
  s += line_svg(f.left, f.top + f.h, f.left + f.w, f.top + f.h);
  s += line_svg(f.left, f.top, f.left, f.top + f.h);
  for (double t : xt) s += line_svg(f.px(t), f.top + f.h, f.px(t), f.top + f.h + 5);
  for (double t : yt)
    if (y_shown(t)) s += line_svg(f.left - 5, f.py(t), f.left, f.py(t));
  s += "</g>\n<g fill=\"black\">\n";
  for (double t : xt)
    s += "<text x=\"" + num(f.px(t)) + "\" y=\"" + num(f.top + f.h + 18) +
         "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  for (double t : yt)
    if (y_shown(t))
      s += "<text x=\"" + num(f.left - 8) + "\" y=\"" + num(f.py(t) + 4) +
           "\" text-anchor=\"end\">" + f.y_tick_label(t) + "</text>\n";
  s += "<text x=\"" + num(f.left + f.w / 2) + "\" y=\"" + num(options.height - 16.0) +
       "\" text-anchor=\"middle\">" + escape_xml(options.x_label) + "</text>\n";
  s += "<text x=\"20\" y=\"" + num(f.top + f.h / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " + num(f.top + f.h / 2) + ")\">" +
       escape_xml(options.y_label) + "</text>\n";
  return s + "</g>\n";
}

struct SpanStyle {
  const char* css_class;
  const char* colour;
  const char* legend;
};

SpanStyle style_of(SpanKind kind) {
  if (kind == SpanKind::nonfinite_loss)
    return {.css_class = "nonfinite-loss", .colour = "#f4a6a6", .legend = "non-finite loss"};
  return {.css_class = "skipped-steps", .colour = "#fde3b0", .legend = "skipped steps"};
}

// The spans, shaded behind the curves; at least 3 pixels wide so that one step shows.
std::string spans_svg(const Frame& f, const std::vector<Span>& spans) {
  std::string s = "<g class=\"spans\">\n";
  for (const Span& span : spans) {
    if (!std::isfinite(span.from) || !std::isfinite(span.to)) continue;
    const double x0 = f.px(std::clamp(std::min(span.from, span.to), f.xr.low, f.xr.high));
    const double x1 = f.px(std::clamp(std::max(span.from, span.to), f.xr.low, f.xr.high));
    const double width = std::max(3.0, x1 - x0);
    const SpanStyle style = style_of(span.kind);
    s += "<rect class=\"" + std::string(style.css_class) + "\" x=\"" +
         num(std::min(x0, f.left + f.w - width)) + "\" y=\"" + num(f.top) + "\" width=\"" +
         num(width) + "\" height=\"" + num(f.h) + "\" fill=\"" + style.colour +
         "\" fill-opacity=\"0.7\"><title>" + escape_xml(span.label) + "</title></rect>\n";
  }
  return s + "</g>\n";
}

// One path per curve, and a circle per finite point of the curves with markers. A point
// without a finite neighbour draws no line, so it gets a small circle of its own.
std::string curves_svg(const Frame& f, const std::vector<Curve>& curves) {
  std::string s;
  for (size_t c = 0; c < curves.size(); ++c) {
    const Curve& curve = curves[c];
    const std::string colour = kColours[c % std::size(kColours)];
    auto shown = [&](size_t i) {
      return i < curve.x.size() && std::isfinite(curve.x[i]) && std::isfinite(f.fy(curve.y[i]));
    };
    std::string d, markers;
    bool pen_down = false;
    for (size_t i = 0; i < curve.x.size(); ++i) {
      if (!shown(i)) {
        pen_down = false;
        continue;
      }
      const double x = f.px(curve.x[i]), y = f.py(f.fy(curve.y[i]));
      d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + num(x) + " " + num(y);
      if (!curve.markers && !pen_down && !shown(i + 1))
        markers += "<circle class=\"point\" cx=\"" + num(x) + "\" cy=\"" + num(y) +
                   "\" r=\"2.5\" fill=\"" + colour + "\"/>\n";
      pen_down = true;
      if (curve.markers)
        markers += "<circle class=\"marker\" cx=\"" + num(x) + "\" cy=\"" + num(y) +
                   "\" r=\"3.5\" fill=\"" + colour + "\"><title>" + escape_xml(curve.label) +
                   " at " + tick_label(curve.x[i]) + ": " + tick_label(curve.y[i]) +
                   "</title></circle>\n";
    }
    s += "<path fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5\" d=\"" + d +
         "\"><title>" + escape_xml(curve.label) + "</title></path>\n" + markers;
  }
  return s;
}

// One entry per curve, then one per kind of span shown.
std::string legend_svg(const Frame& f, const std::vector<Curve>& curves,
                       const std::vector<Span>& spans) {
  std::string s = "<g>\n";
  const double x = f.left + f.w + 20;
  double y = f.top + 10;
  for (size_t c = 0; c < curves.size(); ++c, y += 20) {
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x + 24) + "\" y2=\"" +
         num(y) + "\" stroke=\"" + kColours[c % std::size(kColours)] + "\" stroke-width=\"3\"/>\n";
    s += "<text x=\"" + num(x + 30) + "\" y=\"" + num(y + 4) + "\">" + escape_xml(curves[c].label) +
         "</text>\n";
  }
  for (SpanKind kind : {SpanKind::skipped_steps, SpanKind::nonfinite_loss}) {
    if (std::none_of(spans.begin(), spans.end(), [&](const Span& sp) { return sp.kind == kind; }))
      continue;
    const SpanStyle style = style_of(kind);
    s += "<rect x=\"" + num(x) + "\" y=\"" + num(y - 6) + "\" width=\"24\" height=\"12\" fill=\"" +
         style.colour + "\"/>\n";
    s += "<text x=\"" + num(x + 30) + "\" y=\"" + num(y + 4) + "\">" + style.legend + "</text>\n";
    y += 20;
  }
  return s + "</g>\n";
}

}  // namespace

std::string line_plot_svg(const std::vector<Curve>& curves, const PlotOptions& options) {
  MIXP_CHECK(options.width >= 200 && options.height >= 150,
             "line_plot_svg: the plot must be at least 200 x 150 pixels, got ", options.width,
             " x ", options.height);
  Frame f;
  f.log_y = options.log_y;
  for (const Curve& c : curves) {
    MIXP_CHECK(c.x.size() == c.y.size(), "line_plot_svg: curve '", c.label, "' has ", c.x.size(),
               " x values and ", c.y.size(), " y values");
    for (size_t i = 0; i < c.x.size(); ++i) {
      if (!std::isfinite(c.x[i]) || !std::isfinite(f.fy(c.y[i]))) continue;
      f.xr.add(c.x[i]);
      f.yr.add(f.fy(c.y[i]));
    }
  }
  for (const Span& span : options.spans) f.xr.add(span.from), f.xr.add(span.to);
  f.xr.settle();
  f.yr.settle();
  const std::vector<double> xt = nice_ticks(f.xr.low, f.xr.high);
  std::vector<double> yt = nice_ticks(f.yr.low, f.yr.high);
  // Extend the ranges to whole ticks on y, so that the curves sit inside labelled space, and
  // label the ticks of the extended range.
  const double ystep = yt.size() >= 2 ? yt[1] - yt[0] : (f.yr.high - f.yr.low);
  f.yr.low = std::min(f.yr.low, std::floor(f.yr.low / ystep) * ystep);
  f.yr.high = std::max(f.yr.high, std::ceil(f.yr.high / ystep) * ystep);
  yt = nice_ticks(f.yr.low, f.yr.high);
  f.w = options.width - f.left - f.right;
  f.h = options.height - f.top - f.bottom;
  return svg_open(options.width, options.height) + spans_svg(f, options.spans) +
         axes_svg(f, xt, yt, options) + curves_svg(f, curves) +
         legend_svg(f, curves, options.spans) + "</svg>\n";
}

bool spans_decades(const std::vector<Curve>& curves, double decades) {
  Range r;
  for (const Curve& c : curves)
    for (double y : c.y)
      if (y > 0) r.add(y);
  return r.low <= r.high && std::log10(r.high / r.low) > decades;
}

void write_line_plot(const std::string& path, const std::vector<Curve>& curves,
                     const PlotOptions& options) {
  io::write_file_atomically(path, line_plot_svg(curves, options));
}

std::string bar_chart_svg(const std::vector<std::string>& categories,
                          const std::vector<BarSeries>& series, const PlotOptions& options) {
  MIXP_CHECK(options.width >= 300,
             "bar_chart_svg: the chart must be at least 300 pixels wide, got ", options.width);
  double top_value = 0.0;
  for (const BarSeries& b : series) {
    MIXP_CHECK(b.values.size() == categories.size(), "bar_chart_svg: series '", b.label, "' has ",
               b.values.size(), " values for ", categories.size(), " categories");
    for (double v : b.values) {
      MIXP_CHECK(std::isfinite(v) && v >= 0, "bar_chart_svg: series '", b.label,
                 "' has a value of ", v);
      top_value = std::max(top_value, v);
    }
  }
  const double bar = 12, gap = 10;
  const double group = bar * double(std::max<size_t>(series.size(), 1)) + gap;
  Frame f;
  f.left = 130;
  f.h = group * double(categories.size());
  const int height = std::max(options.height, int(std::ceil(f.top + f.h + f.bottom)));
  f.h = height - f.top - f.bottom;
  f.w = options.width - f.left - f.right;
  const std::vector<double> ticks = nice_ticks(0.0, top_value > 0 ? top_value : 1.0, 5);
  f.xr.low = 0.0;
  f.xr.high = std::max(ticks.back(), top_value);
  f.yr.low = 0.0;
  f.yr.high = 1.0;

  std::string s = svg_open(options.width, height);
  s += "<text x=\"" + num(f.left + f.w / 2) +
       "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" + escape_xml(options.title) +
       "</text>\n";
  s += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double t : ticks) s += line_svg(f.px(t), f.top, f.px(t), f.top + f.h);
  s += "</g>\n<g fill=\"black\">\n";
  for (double t : ticks)
    s += "<text x=\"" + num(f.px(t)) + "\" y=\"" + num(f.top + f.h + 18) +
         "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  s += "<text x=\"" + num(f.left + f.w / 2) + "\" y=\"" + num(height - 12.0) +
       "\" text-anchor=\"middle\">" + escape_xml(options.x_label) + "</text>\n";
  for (size_t c = 0; c < categories.size(); ++c)
    s += "<text x=\"" + num(f.left - 8) + "\" y=\"" + num(f.top + group * double(c) + group / 2) +
         "\" text-anchor=\"end\">" + escape_xml(categories[c]) + "</text>\n";
  s += "</g>\n";
  for (size_t b = 0; b < series.size(); ++b) {
    s += "<g fill=\"" + std::string(kColours[b % std::size(kColours)]) + "\">\n";
    for (size_t c = 0; c < categories.size(); ++c) {
      const double v = series[b].values[c];
      s += "<rect class=\"bar\" x=\"" + num(f.left) + "\" y=\"" +
           num(f.top + group * double(c) + gap / 2 + bar * double(b)) + "\" width=\"" +
           num(std::max(0.0, f.px(v) - f.left)) + "\" height=\"" + num(bar - 1) + "\"><title>" +
           escape_xml(series[b].label + ", " + categories[c] + ": " + tick_label(v) + " " +
                      options.x_label) +
           "</title></rect>\n";
    }
    s += "</g>\n";
  }
  s += "<g stroke=\"black\" stroke-width=\"1\">\n" + line_svg(f.left, f.top, f.left, f.top + f.h) +
       "</g>\n";
  std::vector<Curve> legend;
  for (const BarSeries& b : series) legend.push_back({.label = b.label});
  return s + legend_svg(f, legend, {}) + "</svg>\n";
}

namespace {

// Where the loss scale 2^k moves the format's bounds (a value v becomes v * 2^k): dashed lines at
// the zero and overflow bounds, shifted by -k, with their labels.
template <typename Px>
std::string loss_scale_marks_svg(int k, double zero_x, double max_x, double top, double h,
                                 const Px& px) {
  std::string s;
  s += "<g stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\">\n";
  for (double x : {zero_x - k, max_x - k})
    s += "<line x1=\"" + num(px(x)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(px(x)) + "\" y2=\"" +
         num(top + h) + "\"/>\n";
  s += "</g>\n<g fill=\"#d62728\" font-size=\"11\">\n";
  s += "<text x=\"" + num(px(zero_x - k) + 4) + "\" y=\"" + num(top + 14) +
       "\">zero below, at loss scale 2^" + std::to_string(k) + "</text>\n";
  s += "<text x=\"" + num(px(max_x - k) - 4) + "\" y=\"" + num(top + 28) +
       "\" text-anchor=\"end\">overflow above, at loss scale 2^" + std::to_string(k) + "</text>\n";
  s += "</g>\n";
  return s;
}

}  // namespace

std::string log2_histogram_svg(const Log2Histogram& hist, int width, int height) {
  MIXP_CHECK(hist.exponents.size() == hist.fractions.size(),
             "log2_histogram_svg: ", hist.exponents.size(), " binades and ", hist.fractions.size(),
             " fractions");
  int k = 0;
  MIXP_CHECK(hist.loss_scale > 0 && std::isfinite(hist.loss_scale) &&
                 std::frexp(hist.loss_scale, &k) == 0.5,
             "log2_histogram_svg: the loss scale must be a power of two, got ", hist.loss_scale);
  k -= 1;
  MIXP_CHECK(width >= 300 && height >= 200, "log2_histogram_svg: at least 300 x 200 pixels");
  double top_fraction = 0.0;
  for (double f : hist.fractions) {
    MIXP_CHECK(f >= 0 && std::isfinite(f), "log2_histogram_svg: a fraction of ", f);
    top_fraction = std::max(top_fraction, f);
  }
  // The format's bounds in log2 units: zero at or below s/2, subnormal below n, overflow above M.
  const Format& f = hist.format;
  const double zero_x = std::log2(f.min_subnormal()) - (f.subnormals ? 1.0 : 0.0);
  const double normal_x = std::log2(f.min_normal());
  const double max_x = std::log2(f.max());
  double lo = std::min(zero_x - 4, -40.0), hi = std::max(max_x + 2, 40.0);
  for (int e : hist.exponents) lo = std::min(lo, double(e)), hi = std::max(hi, double(e + 1));
  if (k != 0) lo = std::min(lo, zero_x - k - 2), hi = std::max(hi, max_x - k + 2);
  const std::vector<double> yt = nice_ticks(0.0, top_fraction > 0 ? 100 * top_fraction : 1.0, 5);
  const double ytop = std::max(yt.back(), top_fraction > 0 ? 100 * top_fraction : 1.0);

  const double left = 70, right = 20, top = 70, bottom = 70;
  const double w = width - left - right, h = height - top - bottom;
  auto px = [&](double x) { return left + (std::clamp(x, lo, hi) - lo) / (hi - lo) * w; };
  auto py = [&](double percent) { return top + h - percent / ytop * h; };

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
       "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
       std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" +
       std::to_string(height) + "\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(left + w / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"16\">" +
       escape_xml(hist.title) + "</text>\n";
  char caption[160];
  std::snprintf(caption, sizeof caption,
                "%.2f%% of the values are exactly zero; bars: %% of the "
                "non-zero values per binade",
                100 * hist.zero_fraction);
  s += "<text x=\"" + num(left + w / 2) + "\" y=\"40\" text-anchor=\"middle\">" + caption +
       "</text>\n";

  // The regions of the format's range, unscaled.
  struct Region {
    double from, to;
    const char* colour;
    std::string label;
  };
  const std::string name = f.name();
  const std::vector<Region> regions = {
      {.from = lo, .to = zero_x, .colour = "#f4c7c3", .label = "become zero in " + name},
      {.from = zero_x, .to = normal_x, .colour = "#fce8b2", .label = name + " subnormals"},
      {.from = normal_x, .to = max_x, .colour = "#b7e1cd", .label = name + " normal range"},
      {.from = max_x, .to = hi, .colour = "#d9d9d9", .label = "overflow in " + name}};
  s += "<g class=\"regions\">\n";
  for (const Region& r : regions) {
    if (r.to <= r.from) continue;
    s += "<rect class=\"region\" x=\"" + num(px(r.from)) + "\" y=\"" + num(top) + "\" width=\"" +
         num(px(r.to) - px(r.from)) + "\" height=\"" + num(h) + "\" fill=\"" + r.colour +
         "\"><title>" + escape_xml(r.label) + "</title></rect>\n";
    s += "<text x=\"" + num((px(r.from) + px(r.to)) / 2) + "\" y=\"" + num(top - 6) +
         "\" text-anchor=\"middle\" font-size=\"10\">" + escape_xml(r.label) + "</text>\n";
  }
  s += "</g>\n";

  // Axes and ticks: x every 8 binades, labelled log2 |x|.
  s += "<g stroke=\"black\" stroke-width=\"1\">\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + h) + "\" x2=\"" + num(left + w) +
       "\" y2=\"" + num(top + h) + "\"/>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" +
       num(top + h) + "\"/>\n";
  s += "</g>\n<g fill=\"black\">\n";
  for (int t = int(std::ceil(lo / 8)) * 8; t <= hi; t += 8)
    s += "<text x=\"" + num(px(t)) + "\" y=\"" + num(top + h + 16) + "\" text-anchor=\"middle\">" +
         std::to_string(t) + "</text>\n";
  for (double t : yt)
    s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(py(t) + 4) + "\" text-anchor=\"end\">" +
         tick_label(t) + "</text>\n";
  s += "<text x=\"" + num(left + w / 2) + "\" y=\"" + num(height - 30.0) +
       "\" text-anchor=\"middle\">log2 |value| (bar e covers [2^e, 2^(e+1)))</text>\n";
  s += "<text x=\"18\" y=\"" + num(top + h / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + num(top + h / 2) +
       ")\">% of non-zero values</text>\n";
  s += "</g>\n";

  // The bars.
  s += "<g fill=\"#1f77b4\">\n";
  for (size_t i = 0; i < hist.exponents.size(); ++i) {
    if (hist.fractions[i] <= 0) continue;
    const double x0 = px(hist.exponents[i]), x1 = px(hist.exponents[i] + 1);
    char title[64];
    std::snprintf(title, sizeof title, "2^%d: %.3f%%", hist.exponents[i], 100 * hist.fractions[i]);
    s += "<rect class=\"bar\" x=\"" + num(x0 + 0.5) + "\" y=\"" + num(py(100 * hist.fractions[i])) +
         "\" width=\"" + num(std::max(0.5, x1 - x0 - 1)) + "\" height=\"" +
         num(top + h - py(100 * hist.fractions[i])) + "\"><title>" + title + "</title></rect>\n";
  }
  s += "</g>\n";

  if (k != 0) s += loss_scale_marks_svg(k, zero_x, max_x, top, h, px);
  s += "</svg>\n";
  return s;
}

void write_log2_histogram(const std::string& path, const Log2Histogram& histogram) {
  io::write_file_atomically(path, log2_histogram_svg(histogram));
}

}  // namespace mixp::diag
