// mixp/diag/advisor.h — which layers should stay in higher precision.
//
// advise() reads each layer's statistics (mixp/diag/stats.h, of the true values: gradients
// unscaled) and names the layers that a low-precision format would hurt, by two rules:
//   1. fp16 underflow: more than max_fp16_underflow of the layer's activation gradients would
//      still flush to zero in fp16 at the loss scale chosen (underflow_fraction_at: exact for
//      a power-of-two scale). That scale is the one the whole model trains at (the scaler's,
//      bounded by the layers that overflow first), so such a layer's backward should run in
//      fp32 (or bf16, whose range is fp32's).
//   2. overflow: more than max_overflow of its activations or weights (unscaled) would round
//      above the largest finite value of bf16 or of E4M3 (the format FP8 recipes store
//      activations and weights in, before any per-tensor scale). The default 0 flags any.
// A layer is named once per rule and format that fires, with the measured fraction.
//
// Example:
//
//   std::vector<mixp::diag::LayerNumerics> layers = ...;   // from a Collector's records
//   for (const auto& a : mixp::diag::advise(layers, /*loss_scale=*/65536.0))
//     std::printf("keep %s in fp32: %s\n", a.layer.c_str(), a.reason.c_str());
#pragma once

#include <string>
#include <vector>

#include "mixp/diag/stats.h"

namespace mixp::diag {

/// One layer's statistics; weights merges the layer's parameters.
struct LayerNumerics {
  std::string layer;
  TensorStats activations, activation_gradients, weights;
};

struct AdvisorOptions {
  double max_fp16_underflow = 0.01;  ///< rule 1: the largest tolerated fraction, in [0, 1]
  double max_overflow = 0.0;         ///< rule 2: the largest tolerated fraction, in [0, 1]
};

struct Advice {
  std::string layer;
  std::string rule;       ///< "fp16_underflow", "bf16_overflow" or "e4m3_overflow"
  double fraction = 0.0;  ///< what was measured
  std::string reason;     ///< one sentence with the numbers
};

/// The layers to keep in higher precision, in the order given. `loss_scale` must be a power of
/// two; throws mixp::Error otherwise or for options outside [0, 1].
std::vector<Advice> advise(const std::vector<LayerNumerics>& layers, double loss_scale,
                           const AdvisorOptions& options = {});

/// The fraction of the non-zero finite values of `s` that overflow `format` at scale 1, from the
/// values' own query of that format at scale 1 when `s` has one, else from its max |x| (then 1
/// or 0: whether any does).
double overflow_fraction(const TensorStats& s, const Format& format);

}  // namespace mixp::diag
