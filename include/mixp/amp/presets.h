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
//
// The low-precision presets run the forward pass in an Autocast scope of their dtype too, so
// that fp32 inputs and the fp32 norm parameters meet bf16 or fp16 weights by the op policy.
// (fp8 comes with the FP8 recipes.)
//
// Example:
//
//   const mixp::amp::Preset& p = mixp::amp::preset("bf16");
//   std::vector<mixp::Tensor> params = p.cast_parameters(model_params, is_norm);
//   mixp::optim::AdamW opt(params, {.lr = 1e-3, .precision = p.optimizer_precision});
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

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixp/amp/autocast.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/optim/master_weights.h"
#include "mixp/tensor.h"

namespace mixp::amp {

enum class LossScaling : uint8_t { none = 0, dynamic = 1 };

struct Preset {
  const char* name;
  DType parameter_dtype;              ///< storage of the parameters that are not norms
  std::optional<DType> compute_dtype;  ///< the Autocast dtype of the forward pass, if any
  optim::Precision optimizer_precision;
  LossScaling loss_scaling;

  /// The parameters as this preset stores them: bf16 and fp16 presets make new leaf tensors of
  /// their dtype (requiring grad) for every parameter except those with keep_fp32[i]; the
  /// others come back as they are. keep_fp32 is empty (no exceptions) or one flag per parameter.
  std::vector<Tensor> cast_parameters(const std::vector<Tensor>& parameters,
                                      const std::vector<bool>& keep_fp32 = {}) const;
  /// The scope of the forward pass: Autocast(compute_dtype), or a disabled one.
  Autocast autocast() const;
  /// A GradScaler with PyTorch's defaults, enabled when the preset scales the loss.
  GradScaler make_scaler(GradScalerOptions options = {}) const;
};

/// Every preset, in the order of the table above.
std::span<const Preset> all_presets();
/// The preset named `name`; throws mixp::Error listing the known names otherwise.
const Preset& preset(std::string_view name);

}  // namespace mixp::amp
