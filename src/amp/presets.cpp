#include "mixp/amp/presets.h"

#include "mixp/error.h"

namespace mixp::amp {
namespace {

using optim::Precision;
constexpr Preset kPresets[] = {
    {.name = "fp32",
     .parameter_dtype = DType::f32,
     .compute_dtype = std::nullopt,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none},
    {.name = "amp-bf16",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none},
    {.name = "amp-fp16",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::f16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::dynamic},
    {.name = "bf16",
     .parameter_dtype = DType::bf16,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = std::nullopt,
     .optimizer_state_dtype = DType::bf16},
    {.name = "fp16",
     .parameter_dtype = DType::f16,
     .compute_dtype = DType::f16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::dynamic},
    {.name = "bf16-sr",
     .parameter_dtype = DType::bf16,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::stochastic_rounding,
     .loss_scaling = LossScaling::none,
     .fp8 = std::nullopt,
     .optimizer_state_dtype = DType::bf16},
    {.name = "fp8",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.scaling = Fp8Scaling::delayed, .format = Fp8Format::hybrid}},
    {.name = "fp8-current",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.scaling = Fp8Scaling::current, .format = Fp8Format::hybrid}},
    // E4M3 for gradients too, as Transformer Engine's MXFP8BlockScaling: with a scale per 32
    // elements, E5M2's range is not needed and E4M3's extra mantissa bit is kept.
    {.name = "mxfp8",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.scaling = Fp8Scaling::mxfp8, .format = Fp8Format::e4m3}},
    {.name = "fp8-block",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.scaling = Fp8Scaling::block_128x128, .format = Fp8Format::e4m3}},
    {.name = "fp8-e4m3-noscale",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.scaling = Fp8Scaling::none, .format = Fp8Format::e4m3}},
};

}  // namespace

std::span<const Preset> all_presets() { return kPresets; }

const Preset& preset(std::string_view name) {
  std::string known;
  for (const Preset& p : kPresets) {
    if (name == p.name) return p;
    known += std::string(known.empty() ? "" : ", ") + p.name;
  }
  MIXP_CHECK(false, "unknown precision preset '", name, "'; known presets: ", known);
  return kPresets[0];  // unreachable
}

std::vector<Tensor> Preset::cast_parameters(const std::vector<Tensor>& parameters,
                                            const std::vector<bool>& keep_fp32) const {
  MIXP_CHECK(keep_fp32.empty() || keep_fp32.size() == parameters.size(), "preset ", name, ": ",
             keep_fp32.size(), " keep_fp32 flags for ", parameters.size(), " parameters");
  std::vector<Tensor> out;
  out.reserve(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    MIXP_CHECK(p.defined() && is_floating(p.dtype()), "preset ", name, ": parameter ", i,
               " is not a floating tensor");
    const bool keep = !keep_fp32.empty() && keep_fp32[i];
    if (keep || p.dtype() == parameter_dtype) {
      out.push_back(p);
      continue;
    }
    Tensor cast = empty(p.shape(), parameter_dtype, MemoryTag::parameter);
    cast.copy_(p);  // rounds to nearest even
    out.push_back(cast.set_requires_grad(true));
  }
  return out;
}

Autocast Preset::autocast() const {
  return Autocast(compute_dtype.value_or(DType::bf16), compute_dtype.has_value());
}

Preset preset(std::string_view name, MxScaleRounding rounding) {
  Preset p = preset(name);
  if (p.fp8) p.fp8->mx_scale_rounding = rounding;
  return p;
}

std::unique_ptr<Fp8State> Preset::make_fp8_state() const {
  return fp8 ? std::make_unique<Fp8State>(*fp8) : nullptr;
}

GradScaler Preset::make_scaler(GradScalerOptions options) const {
  options.enabled = loss_scaling == LossScaling::dynamic;
  return GradScaler(options);
}

}  // namespace mixp::amp
