#include "train/inspect_block_scales.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "ops/fp8_ops.h"
#include "train/low_precision_state.h"

namespace mixp::train {
namespace {

using nlohmann::json;

bool block_scaled(const amp::Preset& p) {
  if (!p.fp8) return false;
  if (p.fp8->fp4) return true;
  const amp::Fp8Scaling s = p.fp8->scaling;
  return s == amp::Fp8Scaling::mxfp8 || s == amp::Fp8Scaling::block_1x128 ||
         s == amp::Fp8Scaling::block_128x128;
}

// A 2-D f32 or bf16 copy of t's values: [numel / last, last].
Tensor as_rows(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor v = t.detach();
  if (v.dtype() != DType::f32 && v.dtype() != DType::bf16) v = v.to(DType::f32);
  const int64_t last = v.size(v.ndim() - 1);
  return v.reshape({v.numel() / last, last}).clone(MemoryTag::workspace);
}

// The output gradient as the true values: divided by the loss scale, in fp32.
Tensor unscaled(const Tensor& g, double loss_scale) {
  Tensor v = as_rows(g);
  if (v.dtype() != DType::f32) v = v.to(DType::f32);
  float* p = v.data<float>();
  for (int64_t i = 0; i < v.numel(); ++i) p[i] = float(double(p[i]) / loss_scale);
  return v;
}

std::string describe(const amp::Preset& p) {
  const amp::Fp8Recipe& r = *p.fp8;
  const std::string mx_rule = std::string(", scale rule ") + amp::name_of(r.mx_scale_rounding);
  if (!r.fp4) {
    const std::string element = name_of(amp::fp8_dtype(r.format, amp::Fp8Role::input)) +
                                std::string(" inputs and weights, ") +
                                name_of(amp::fp8_dtype(r.format, amp::Fp8Role::gradient)) +
                                " gradients";
    if (r.scaling == amp::Fp8Scaling::mxfp8) return element + ", an E8M0 scale per 32" + mx_rule;
    return element + ", fp32 scales per 1x128 of inputs and gradients and per " +
           (r.scaling == amp::Fp8Scaling::block_128x128 ? "128x128 tile" : "1x128") + " of weights";
  }
  const amp::Fp4Recipe& f = *r.fp4;
  std::string text = f.scaling == amp::Fp4Scaling::nvfp4
                         ? "E2M1, an E4M3 scale per 16 and an fp32 tensor scale"
                         : "E2M1, an E8M0 scale per 32" + std::string(", scale rule ") +
                               amp::name_of(f.mx_scale_rounding);
  text += f.square_weights ? ", square weight tiles" : ", weights in 1-D blocks";
  text += f.stochastic_gradients ? ", gradients rounded stochastically"
                                 : ", gradients rounded to nearest even";
  return text;
}

BlockScaleLayer fp8_layer(const LinearTensorCapture::Layer& l, const amp::Fp8Recipe& r) {
  const amp::Fp8Scaling act = ops::detail::activation_scaling(r.scaling);
  const amp::MxScaleRounding mx = r.mx_scale_rounding;
  BlockScaleLayer out;
  out.input =
      diag::block_scale_stats(l.input, amp::fp8_dtype(r.format, amp::Fp8Role::input), act, mx);
  out.weight = diag::block_scale_stats(
      as_rows(l.linear->weight()), amp::fp8_dtype(r.format, amp::Fp8Role::weight), r.scaling, mx);
  if (l.output_gradient.defined())
    out.output_gradient = diag::block_scale_stats(
        l.output_gradient, amp::fp8_dtype(r.format, amp::Fp8Role::gradient), act, mx);
  return out;
}

BlockScaleLayer fp4_layer(const LinearTensorCapture::Layer& l, const amp::Fp4Recipe& r,
                          const PhiloxState& dgrad_rounding) {
  BlockScaleLayer out;
  out.input = diag::block_scale_stats(l.input, r.scaling, {.mx_rounding = r.mx_scale_rounding});
  out.weight = diag::block_scale_stats(
      as_rows(l.linear->weight()), r.scaling,
      {.square_blocks = r.square_weights, .mx_rounding = r.mx_scale_rounding});
  if (l.output_gradient.defined())
    out.output_gradient = diag::block_scale_stats(
        l.output_gradient, r.scaling,
        {.rounding =
             r.stochastic_gradients ? amp::Fp4Rounding::stochastic : amp::Fp4Rounding::nearest_even,
         .philox = dgrad_rounding,
         .mx_rounding = r.mx_scale_rounding});
  return out;
}

json stats_json(const diag::BlockScaleStats& s) {
  return {{"block", {s.block_rows, s.block_cols}},
          {"blocks", s.blocks},
          {"zero_blocks", s.zero_blocks},
          {"non_finite_blocks", s.non_finite_blocks},
          {"scaled_blocks", s.scaled_blocks},
          {"log2_scale_min", s.log2_scale_min},
          {"log2_scale_median", s.log2_scale_median},
          {"log2_scale_max", s.log2_scale_max},
          {"log2_scale_spread", s.log2_scale_spread()},
          {"saturated_blocks", s.saturated_blocks},
          {"saturated_fraction", s.saturated_fraction()},
          {"flushed_blocks", s.flushed_blocks},
          {"flushed_fraction", s.flushed_fraction()},
          {"nonzero_elements", s.nonzero_elements},
          {"flushed_elements", s.flushed_elements},
          {"flushed_element_fraction", s.flushed_element_fraction()},
          {"relative_rms_error", s.relative_rms_error},
          {"max_relative_error", s.max_relative_error}};
}

// The tensors of a layer by their names in the table, the CSV and the JSON.
struct NamedStats {
  const char* name;
  const diag::BlockScaleStats* stats;
};
std::vector<NamedStats> tensors_of(const BlockScaleLayer& l) {
  return {{"input", &l.input}, {"weight", &l.weight}, {"output_gradient", &l.output_gradient}};
}

std::string percent(double f) {
  char buf[32];
  // Three significant digits, so that one block in 50,000 does not print as 0.00%.
  std::snprintf(buf, sizeof buf, "%.3g%%", 100 * f);
  return buf;
}

}  // namespace

std::vector<amp::Preset> block_scale_presets(const std::vector<std::string>& names,
                                             const TrainOptions& run) {
  std::vector<amp::Preset> out;
  for (const std::string& name : names) {
    MIXP_CHECK(!name.empty(), "--block-formats: an empty preset name");
    const amp::Preset& p = amp::preset(name);
    MIXP_CHECK(block_scaled(p), "--block-formats: preset '", name,
               "' has no block scales; the block-scaled presets are mxfp8, fp8-block, nvfp4 and "
               "mxfp4");
    out.push_back(amp::preset(name, run.mx_scale_rounding,
                              p.fp8->fp4 ? run.fp4_without : amp::Fp4Ablation{}));
  }
  return out;
}

LinearTensorCapture::LinearTensorCapture(nn::Module& module, double loss_scale)
    : loss_scale_(loss_scale) {
  for (auto& [name, m] : module.named_modules())
    if (auto* linear = dynamic_cast<nn::Linear*>(m))
      layers_.push_back({.name = name, .linear = linear});
  // Each layer's slot by index: layers_ does not grow after this, so the pointers hold.
  for (Layer& layer : layers_) {
    Layer* slot = &layer;
    pre_hooks_.push_back(layer.linear->add_forward_pre_hook([slot](nn::Module&, const Tensor& x) {
      if (!slot->input.defined()) slot->input = as_rows(x);
    }));
    hooks_.push_back(layer.linear->add_forward_hook([this, slot](nn::Module&, const Tensor& y) {
      if (slot->output_gradient.defined()) return y;
      return autograd::with_gradient_hook(y, [this, slot](const Tensor& g) {
        if (!slot->output_gradient.defined()) slot->output_gradient = unscaled(g, loss_scale_);
      });
    }));
  }
}

LinearTensorCapture::~LinearTensorCapture() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].linear->remove_forward_pre_hook(pre_hooks_[i]);
    layers_[i].linear->remove_forward_hook(hooks_[i]);
  }
}

std::vector<BlockScaleInspection> inspect_block_scales(const LinearTensorCapture& capture,
                                                       nn::Module& module,
                                                       const std::vector<amp::Preset>& presets,
                                                       uint64_t seed, int64_t step) {
  std::vector<BlockScaleInspection> out;
  for (const amp::Preset& p : presets) {
    BlockScaleInspection inspection{.preset = p.name, .recipe = describe(p)};
    std::unique_ptr<amp::Fp8State> state = make_low_precision_state(p, &module, seed);
    if (p.fp8->fp4) state->set_rounding_position(step, 0);
    for (size_t i = 0; i < capture.layers().size(); ++i) {
      const LinearTensorCapture::Layer& l = capture.layers()[i];
      if (!l.input.defined()) continue;  // the forward pass did not reach it
      BlockScaleLayer layer = p.fp8->fp4 ? fp4_layer(l, *p.fp8->fp4, state->gradient_rounding(i, 0))
                                         : fp8_layer(l, *p.fp8);
      layer.layer = l.name;
      layer.computes =
          p.fp8->fp4 && !state->fp4_layer_of(l.linear->weight()) ? "bf16" : std::string(p.name);
      inspection.layers.push_back(std::move(layer));
    }
    out.push_back(std::move(inspection));
  }
  return out;
}

json block_scales_json(const std::vector<BlockScaleInspection>& inspections) {
  json out = json::array();
  for (const BlockScaleInspection& b : inspections) {
    json layers = json::array();
    for (const BlockScaleLayer& l : b.layers) {
      json layer = {{"layer", l.layer}, {"computes", l.computes}};
      for (const NamedStats& t : tensors_of(l)) layer[t.name] = stats_json(*t.stats);
      layers.push_back(layer);
    }
    out.push_back({{"preset", b.preset}, {"recipe", b.recipe}, {"layers", layers}});
  }
  return out;
}

std::string block_scales_csv(const std::vector<BlockScaleInspection>& inspections) {
  std::string out =
      "preset,layer,computes,tensor,block_rows,block_cols,blocks,zero_blocks,non_finite_blocks,"
      "scaled_blocks,log2_scale_min,log2_scale_median,log2_scale_max,log2_scale_spread,"
      "saturated_blocks,saturated_fraction,flushed_blocks,flushed_fraction,nonzero_elements,"
      "flushed_elements,flushed_element_fraction,relative_rms_error,max_relative_error\n";
  char buf[512];
  for (const BlockScaleInspection& b : inspections)
    for (const BlockScaleLayer& l : b.layers)
      for (const NamedStats& t : tensors_of(l)) {
        const diag::BlockScaleStats& s = *t.stats;
        std::snprintf(
            buf, sizeof buf,
            "%s,%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%.17g,%.17g,%.17g,%.17g,%lld,%.17g,"
            "%lld,%.17g,%lld,%lld,%.17g,%.17g,%.17g\n",
            b.preset.c_str(), l.layer.c_str(), l.computes.c_str(), t.name, (long long)s.block_rows,
            (long long)s.block_cols, (long long)s.blocks, (long long)s.zero_blocks,
            (long long)s.non_finite_blocks, (long long)s.scaled_blocks, s.log2_scale_min,
            s.log2_scale_median, s.log2_scale_max, s.log2_scale_spread(),
            (long long)s.saturated_blocks, s.saturated_fraction(), (long long)s.flushed_blocks,
            s.flushed_fraction(), (long long)s.nonzero_elements, (long long)s.flushed_elements,
            s.flushed_element_fraction(), s.relative_rms_error, s.max_relative_error);
        out += buf;
      }
  return out;
}

std::string block_scales_table(const std::vector<BlockScaleInspection>& inspections) {
  std::string out;
  char buf[512];
  for (const BlockScaleInspection& b : inspections) {
    out += "block scales under " + b.preset + " (" + b.recipe +
           ") of the observation step's Linear layers:\n";
    size_t width = 5;
    for (const BlockScaleLayer& l : b.layers) width = std::max(width, l.layer.size());
    std::snprintf(buf, sizeof buf, "%-*s %-9s %-15s %-7s %9s %8s %8s %8s %7s %10s %10s %10s %9s\n",
                  int(width), "layer", "computes", "tensor", "block", "blocks", "log2 min",
                  "median", "max", "spread", "saturated", "flushed", "zeroed", "rms err");
    out += buf;
    for (const BlockScaleLayer& l : b.layers)
      for (const NamedStats& t : tensors_of(l)) {
        const diag::BlockScaleStats& s = *t.stats;
        const std::string block = std::to_string(s.block_rows) + "x" + std::to_string(s.block_cols);
        std::snprintf(buf, sizeof buf,
                      "%-*s %-9s %-15s %-7s %9lld %8.2f %8.2f %8.2f %7.2f %10s %10s %10s %9.4f\n",
                      int(width), l.layer.c_str(), l.computes.c_str(), t.name, block.c_str(),
                      (long long)s.blocks, s.log2_scale_min, s.log2_scale_median, s.log2_scale_max,
                      s.log2_scale_spread(), percent(s.saturated_fraction()).c_str(),
                      percent(s.flushed_fraction()).c_str(),
                      percent(s.flushed_element_fraction()).c_str(), s.relative_rms_error);
        out += buf;
      }
  }
  if (!inspections.empty())
    out +=
        "(log2 min/median/max, spread: the blocks' decode scales in binades; saturated: blocks "
        "with a value\n clipped to the element format's max; flushed: blocks that became all "
        "zeros; zeroed: non-zero values\n that became zero; rms err: ||deq(q(x)) - bf16(x)|| / "
        "||bf16(x)||. Fractions of blocks are of all blocks.)\n";
  return out;
}

}  // namespace mixp::train
