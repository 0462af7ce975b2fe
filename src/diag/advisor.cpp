#include "mixp/diag/advisor.h"

#include <cmath>
#include <cstdio>

#include "mixp/error.h"

namespace mixp::diag {

double overflow_fraction(const TensorStats& s, const Format& format) {
  for (const FormatCounts& c : s.formats)
    if (c.query.format == format && c.query.scale == 1.0) return c.overflow_fraction();
  if (s.nonzero_finite() == 0) return 0.0;
  return fate_of(format, s.max_abs) == Fate::overflow ? 1.0 : 0.0;
}

std::vector<Advice> advise(const std::vector<LayerNumerics>& layers, double loss_scale,
                           const AdvisorOptions& options) {
  MIXP_CHECK(options.max_fp16_underflow >= 0 && options.max_fp16_underflow <= 1 &&
                 options.max_overflow >= 0 && options.max_overflow <= 1,
             "advise: the fractions must be in [0, 1], got ", options.max_fp16_underflow, " and ",
             options.max_overflow);
  std::vector<Advice> out;
  char buf[256];
  for (const LayerNumerics& l : layers) {
    const double under = underflow_fraction_at(l.activation_gradients, Format::fp16(), loss_scale);
    if (under > options.max_fp16_underflow) {
      std::snprintf(buf, sizeof buf,
                    "%.2f%% of its activation gradients underflow fp16 at loss scale %g "
                    "(limit %.2f%%)",
                    100 * under, loss_scale, 100 * options.max_fp16_underflow);
      out.push_back({.layer = l.layer, .rule = "fp16_underflow", .fraction = under, .reason = buf});
    }
    for (const auto& [format, rule] :
         {std::pair<Format, const char*>{Format::bf16(), "bf16_overflow"},
          {Format::e4m3(), "e4m3_overflow"}}) {
      const double act = overflow_fraction(l.activations, format);
      const double w = overflow_fraction(l.weights, format);
      const double worst = std::max(act, w);
      if (worst > options.max_overflow) {
        std::snprintf(buf, sizeof buf,
                      "%.4f%% of its activations and %.4f%% of its weights overflow %s "
                      "(limit %.4f%%)",
                      100 * act, 100 * w, format.name().c_str(), 100 * options.max_overflow);
        out.push_back({.layer = l.layer, .rule = rule, .fraction = worst, .reason = buf});
      }
    }
  }
  return out;
}

}  // namespace mixp::diag
