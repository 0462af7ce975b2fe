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

std::string escape(const std::string& text) {
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

std::string line_plot_svg(const std::vector<Curve>& curves, const PlotOptions& options) {
  MIXP_CHECK(options.width >= 200 && options.height >= 150,
             "line_plot_svg: the plot must be at least 200 x 150 pixels, got ", options.width,
             " x ", options.height);
  Range xr, yr;
  for (const Curve& c : curves) {
    MIXP_CHECK(c.x.size() == c.y.size(), "line_plot_svg: curve '", c.label, "' has ", c.x.size(),
               " x values and ", c.y.size(), " y values");
    for (size_t i = 0; i < c.x.size(); ++i) {
      if (!std::isfinite(c.x[i]) || !std::isfinite(c.y[i])) continue;
      xr.add(c.x[i]);
      yr.add(c.y[i]);
    }
  }
  xr.settle();
  yr.settle();
  const std::vector<double> xt = nice_ticks(xr.low, xr.high), yt = nice_ticks(yr.low, yr.high);
  // Extend the ranges to whole ticks on y, so that the curves sit inside labelled space.
  const double ystep = yt.size() >= 2 ? yt[1] - yt[0] : (yr.high - yr.low);
  yr.low = std::min(yr.low, std::floor(yr.low / ystep) * ystep);
  yr.high = std::max(yr.high, std::ceil(yr.high / ystep) * ystep);

  const double left = 80, right = 180, top = 40, bottom = 60;
  const double w = options.width - left - right, h = options.height - top - bottom;
  auto px = [&](double x) { return left + (x - xr.low) / (xr.high - xr.low) * w; };
  auto py = [&](double y) { return top + h - (y - yr.low) / (yr.high - yr.low) * h; };

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(options.width) +
       "\" height=\"" + std::to_string(options.height) + "\" viewBox=\"0 0 " +
       std::to_string(options.width) + " " + std::to_string(options.height) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(options.width) + "\" height=\"" +
       std::to_string(options.height) + "\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(left + w / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" +
       escape(options.title) + "</text>\n";

  // Grid, ticks and labels.
  s += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double t : yt)
    if (t >= yr.low && t <= yr.high)
      s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(t)) + "\" x2=\"" + num(left + w) +
           "\" y2=\"" + num(py(t)) + "\"/>\n";
  s += "</g>\n<g stroke=\"black\" stroke-width=\"1\">\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + h) + "\" x2=\"" + num(left + w) +
       "\" y2=\"" + num(top + h) + "\"/>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" +
       num(top + h) + "\"/>\n";
  for (double t : xt)
    s += "<line x1=\"" + num(px(t)) + "\" y1=\"" + num(top + h) + "\" x2=\"" + num(px(t)) +
         "\" y2=\"" + num(top + h + 5) + "\"/>\n";
  for (double t : yt)
    if (t >= yr.low && t <= yr.high)
      s += "<line x1=\"" + num(left - 5) + "\" y1=\"" + num(py(t)) + "\" x2=\"" + num(left) +
           "\" y2=\"" + num(py(t)) + "\"/>\n";
  s += "</g>\n<g fill=\"black\">\n";
  for (double t : xt)
    s += "<text x=\"" + num(px(t)) + "\" y=\"" + num(top + h + 18) + "\" text-anchor=\"middle\">" +
         tick_label(t) + "</text>\n";
  for (double t : yt)
    if (t >= yr.low && t <= yr.high)
      s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(py(t) + 4) + "\" text-anchor=\"end\">" +
           tick_label(t) + "</text>\n";
  s += "<text x=\"" + num(left + w / 2) + "\" y=\"" + num(options.height - 16.0) +
       "\" text-anchor=\"middle\">" + escape(options.x_label) + "</text>\n";
  s += "<text x=\"20\" y=\"" + num(top + h / 2) +
       "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " + num(top + h / 2) + ")\">" +
       escape(options.y_label) + "</text>\n";
  s += "</g>\n";

  // One path per curve.
  for (size_t c = 0; c < curves.size(); ++c) {
    const Curve& curve = curves[c];
    std::string d;
    bool pen_down = false;
    for (size_t i = 0; i < curve.x.size(); ++i) {
      if (!std::isfinite(curve.x[i]) || !std::isfinite(curve.y[i])) {
        pen_down = false;
        continue;
      }
      d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + num(px(curve.x[i])) + " " +
           num(py(curve.y[i]));
      pen_down = true;
    }
    s += "<path fill=\"none\" stroke=\"" + std::string(kColours[c % std::size(kColours)]) +
         "\" stroke-width=\"1.5\" d=\"" + d + "\"><title>" + escape(curve.label) +
         "</title></path>\n";
  }

  // Legend.
  s += "<g>\n";
  for (size_t c = 0; c < curves.size(); ++c) {
    const double y = top + 10 + 20.0 * double(c);
    const double x = left + w + 20;
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x + 24) + "\" y2=\"" +
         num(y) + "\" stroke=\"" + kColours[c % std::size(kColours)] + "\" stroke-width=\"3\"/>\n";
    s += "<text x=\"" + num(x + 30) + "\" y=\"" + num(y + 4) + "\">" + escape(curves[c].label) +
         "</text>\n";
  }
  s += "</g>\n</svg>\n";
  return s;
}

void write_line_plot(const std::string& path, const std::vector<Curve>& curves,
                     const PlotOptions& options) {
  io::write_file_atomically(path, line_plot_svg(curves, options));
}

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
       escape(hist.title) + "</text>\n";
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
         "\"><title>" + escape(r.label) + "</title></rect>\n";
    s += "<text x=\"" + num((px(r.from) + px(r.to)) / 2) + "\" y=\"" + num(top - 6) +
         "\" text-anchor=\"middle\" font-size=\"10\">" + escape(r.label) + "</text>\n";
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

  // Where the loss scale moves the bounds: a value v becomes v * 2^k.
  if (k != 0) {
    s += "<g stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\">\n";
    for (double x : {zero_x - k, max_x - k})
      s += "<line x1=\"" + num(px(x)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(px(x)) +
           "\" y2=\"" + num(top + h) + "\"/>\n";
    s += "</g>\n<g fill=\"#d62728\" font-size=\"11\">\n";
    s += "<text x=\"" + num(px(zero_x - k) + 4) + "\" y=\"" + num(top + 14) +
         "\">zero below, at loss scale 2^" + std::to_string(k) + "</text>\n";
    s += "<text x=\"" + num(px(max_x - k) - 4) + "\" y=\"" + num(top + 28) +
         "\" text-anchor=\"end\">overflow above, at loss scale 2^" + std::to_string(k) +
         "</text>\n";
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

void write_log2_histogram(const std::string& path, const Log2Histogram& histogram) {
  io::write_file_atomically(path, log2_histogram_svg(histogram));
}

}  // namespace mixp::diag
