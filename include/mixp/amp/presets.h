// mixp/amp/presets.h — the precision presets: one name sets how a model stores its weights,
// how it computes, who keeps the fp32 master copy, and whether the loss is scaled.
//
//   preset    params             compute                 master copy             loss scaling
//   fp32      fp32               fp32                    -                       none
//   amp-bf16  fp32               bf16 by op policy       params are the master   none
//   amp-fp16  fp32               fp16 by op policy       params are the master   dynamic
//   bf16      bf16 (norms fp32)  bf16                    fp32 in the optimizer   none
//   fp16      fp16 (norms fp32)  fp16                    fp32 in the optimizer   dynamic
//   bf16-sr   bf16 (norms fp32)  bf16                    none: stochastic rounding of the update
//   fp8              fp32  FP8 Linear/attention: delayed scaling, HYBRID; bf16 for the rest
//   fp8-current      fp32  the same with current (just-in-time) per-tensor scaling
//   mxfp8            fp32  MXFP8: E4M3, one E8M0 scale per 32 along k (rounded up, unless
//                          preset(name, MxScaleRounding) says otherwise); bf16 for the rest
//   fp8-block        fp32  E4M3 with fp32 scales per 1x128 (activations, gradients) and
//                          per 128x128 tile (weights); bf16 for the rest
//   fp8-e4m3-noscale fp32  E4M3 everywhere, scale 1 (the unscaled baseline); bf16 for the rest
//   nvfp4            fp32  NVFP4 Linear layers by NVIDIA's recipe (amp::Fp4Recipe): E2M1 with an
//                          E4M3 scale per 16 and an fp32 scale per tensor, 16x16 weight tiles,
//                          the random Hadamard transform on the weight gradient's inputs,
//                          stochastic rounding of gradients, the last 15% of the Linear layers
//                          in bf16; attention and the rest in bf16
//   mxfp4            fp32  the same recipe with MXFP4: E2M1 with an E8M0 scale per 32 (rounded
//                          up unless told otherwise), 32x32 weight tiles
//   auto-fp8         fp32  every Linear layer starts in FP8 (MXFP8) and moves to bf16 and back
//                          by its own statistics (mixp/amp/adaptive.h); bf16 for the rest
//   auto-fp4         fp32  the same from NVFP4 (nvfp4's recipe for the layers in FP4), through
//                          FP8 to bf16; nvfp4's last 15% of the Linear layers stay in bf16
//   fp4-e2m1-noscale fp32  the same Linear layers in E2M1 with no scale at all, rounded to
//                          nearest (the unscaled floor); bf16 for the rest
//   (every fp8 and fp4 preset: params are the master, no loss scaling)
//
// The optimizer's moments (AdamW's m and v) are fp32, except under the two bf16 presets, bf16
// and bf16-sr, whose point is memory: there they are bf16, rounded stochastically
// (mixp/optim/adam.h), 4 bytes a parameter instead of 8. The bf16 preset's fp32 master costs
// 2 bytes and 1 bit a parameter on top of the bf16 weight (mixp/optim/master_weights.h), so
// that preset keeps about 8 bytes a parameter where fp32 keeps 12, and its activations half.
//
// The low-precision presets run the forward pass in an Autocast scope of their dtype too, so
// that fp32 inputs and the fp32 norm parameters meet bf16 or fp16 weights by the op policy.
// The fp8 presets run it in Autocast(bf16) and, inside it, an amp::Fp8Autocast over the
// Fp8State that make_fp8_state() returns; the trainer calls its update() after every step
// (mixp/amp/fp8.h). They scale no loss: per-tensor scaling (delayed or current) puts each
// gradient's own amax at fp8_max, which is what loss scaling would do for one scale for all, and
// block scaling does so per block; the unscaled preset shows what happens without either.
//
// Example:
//
//   const mixp::amp::Preset& p = mixp::amp::preset("bf16");
//   std::vector<mixp::Tensor> params = p.cast_parameters(model_params, is_norm);
//   mixp::optim::AdamW opt(params, {.lr = 1e-3, .precision = p.optimizer_precision,
//                                   .rounding = {seed, 0}, .state_dtype =
//                                   p.optimizer_state_dtype});
//   mixp::amp::GradScaler scaler = p.make_scaler();
//   for (...) {
//     mixp::Tensor loss;
//     { auto scope = p.autocast(); loss = forward(params, batch); }
//     scaler.scale(loss).backward();
//     scaler.step(opt);
//     scaler.update();
//     opt.zero_grad();
//   }
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixp/amp/autocast.h"
#include "mixp/amp/fp8.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/optim/master_weights.h"
#include "mixp/tensor.h"

namespace mixp::amp {

enum class LossScaling : uint8_t { none = 0, dynamic = 1 };

struct Preset {
  const char* name;
  DType parameter_dtype;               ///< storage of the parameters that are not norms
  std::optional<DType> compute_dtype;  ///< the Autocast dtype of the forward pass, if any
  optim::Precision optimizer_precision;
  LossScaling loss_scaling;
  std::optional<Fp8Recipe> fp8 = std::nullopt;  ///< the FP8 recipe of Linear and attention, if any
  DType optimizer_state_dtype = DType::f32;     ///< the moments (optim::AdamOptions::state_dtype)

  /// The parameters as this preset stores them: bf16 and fp16 presets make new leaf tensors of
  /// their dtype (requiring grad) for every parameter except those with keep_fp32[i]; the
  /// others come back as they are. keep_fp32 is empty (no exceptions) or one flag per parameter.
  std::vector<Tensor> cast_parameters(const std::vector<Tensor>& parameters,
                                      const std::vector<bool>& keep_fp32 = {}) const;
  /// The scope of the forward pass: Autocast(compute_dtype), or a disabled one.
  Autocast autocast() const;
  /// A GradScaler with PyTorch's defaults, enabled when the preset scales the loss.
  GradScaler make_scaler(GradScalerOptions options = {}) const;
  /// The FP8 state (amax histories, scales) for a model under this preset; null without fp8.
  std::unique_ptr<Fp8State> make_fp8_state() const;
};

/// Every preset, in the order of the table above.
std::span<const Preset> all_presets();
/// The preset named `name`; throws mixp::Error listing the known names otherwise.
const Preset& preset(std::string_view name);
/// The ingredients of an FP4 recipe an ablation switches off (`mixp train --fp4-without`).
struct Fp4Ablation {
  bool square_weights = false;        ///< "2d-weights": weights in 1 x block blocks
  bool hadamard = false;              ///< "hadamard": no Hadamard transform in wgrad
  bool stochastic_gradients = false;  ///< "sr": gradients rounded to nearest even
  bool bf16_layers = false;           ///< "bf16-layers": every Linear layer in FP4
  bool none() const {
    return !square_weights && !hadamard && !stochastic_gradients && !bf16_layers;
  }
};
/// A comma-separated list of "2d-weights", "hadamard", "sr", "bf16-layers" (or ""); mixp::Error
/// naming an unknown one.
Fp4Ablation parse_fp4_ablation(std::string_view list);
/// The list parse_fp4_ablation() reads, in the order above; "" for none.
std::string name_of(const Fp4Ablation& without);

/// The preset named `name` with its MX block scales rounded by `rounding` and, for an FP4
/// preset, the ingredients `without` switched off; a preset whose recipe has no MX scales
/// ignores `rounding`, and one without an FP4 recipe refuses a non-empty `without`.
///
///   amp::Preset p = amp::preset("mxfp8", amp::MxScaleRounding::up);
///   amp::Preset q = amp::preset("nvfp4", amp::kDefaultMxScaleRounding,
///                               amp::parse_fp4_ablation("hadamard"));
Preset preset(std::string_view name, MxScaleRounding rounding, const Fp4Ablation& without = {});

}  // namespace mixp::amp
