#include "mixp/amp/presets.h"

#include <iterator>
#include <string>

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
    {.name = "nvfp4",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.fp4 = Fp4Recipe{.scaling = Fp4Scaling::nvfp4}}},
    {.name = "mxfp4",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.fp4 = Fp4Recipe{.scaling = Fp4Scaling::mxfp4}}},
    // Every eligible Linear layer starts in NVFP4 (FP8 for auto-fp8) and moves by its statistics
    // (mixp/amp/adaptive.h). auto-fp4 keeps nvfp4's last 15% in bf16, as NVIDIA's recipe does;
    // auto-fp8 has no such rule.
    {.name = "auto-fp8",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.fp4 = Fp4Recipe{.scaling = Fp4Scaling::nvfp4, .bf16_tail = 0.0},
                      .adaptive = true,
                      .adaptive_from_fp8 = true}},
    {.name = "auto-fp4",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.fp4 = Fp4Recipe{.scaling = Fp4Scaling::nvfp4}, .adaptive = true}},
    // The floor: the same layers in E2M1, with no scale and nothing else of the recipe.
    {.name = "fp4-e2m1-noscale",
     .parameter_dtype = DType::f32,
     .compute_dtype = DType::bf16,
     .optimizer_precision = Precision::master_fp32,
     .loss_scaling = LossScaling::none,
     .fp8 = Fp8Recipe{.fp4 = Fp4Recipe{.scaling = Fp4Scaling::none,
                                       .square_weights = false,
                                       .hadamard = false,
                                       .stochastic_gradients = false}}},
};

// The names of Fp4Ablation's switches, in its order.
constexpr std::string_view kIngredients[] = {"2d-weights", "hadamard", "sr", "bf16-layers"};

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
    Tensor cast = empty(p.shape(), parameter_dtype, MemoryTag::parameter, p.device());
    cast.copy_(p);  // rounds to nearest even
    out.push_back(cast.set_requires_grad(true));
  }
  return out;
}

Autocast Preset::autocast() const {
  return Autocast(compute_dtype.value_or(DType::bf16), compute_dtype.has_value());
}

Preset preset(std::string_view name, MxScaleRounding rounding, const Fp4Ablation& without) {
  Preset p = preset(name);
  if (p.fp8) p.fp8->mx_scale_rounding = rounding;
  if (p.fp8 && p.fp8->fp4) {
    Fp4Recipe& r = *p.fp8->fp4;
    r.mx_scale_rounding = rounding;
    r.square_weights = r.square_weights && !without.square_weights;
    r.hadamard = r.hadamard && !without.hadamard;
    r.stochastic_gradients = r.stochastic_gradients && !without.stochastic_gradients;
    if (without.bf16_layers) r.bf16_tail = 0.0;
  } else {
    MIXP_CHECK(without.none(), "preset ", name,
               " has no FP4 recipe, so there is nothing to run "
               "without (",
               name_of(without), ")");
  }
  return p;
}

Fp4Ablation parse_fp4_ablation(std::string_view list) {
  Fp4Ablation out;
  bool* flags[] = {&out.square_weights, &out.hadamard, &out.stochastic_gradients, &out.bf16_layers};
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    size_t i = 0;
    while (i < std::size(kIngredients) && kIngredients[i] != item) ++i;
    MIXP_CHECK(i < std::size(kIngredients), "unknown FP4 ingredient '", item,
               "'; the ingredients are 2d-weights, hadamard, sr and bf16-layers");
    *flags[i] = true;
  }
  return out;
}

std::string name_of(const Fp4Ablation& without) {
  const bool flags[] = {without.square_weights, without.hadamard, without.stochastic_gradients,
                        without.bf16_layers};
  std::string out;
  for (size_t i = 0; i < std::size(kIngredients); ++i)
    if (flags[i]) {
      if (!out.empty()) out += ',';
      out += kIngredients[i];
    }
  return out;
}

std::unique_ptr<Fp8State> Preset::make_fp8_state() const {
  return fp8 ? std::make_unique<Fp8State>(*fp8) : nullptr;
}

GradScaler Preset::make_scaler(GradScalerOptions options) const {
  options.enabled = loss_scaling == LossScaling::dynamic;
  return GradScaler(options);
}

}  // namespace mixp::amp
