// The FP8 or FP4 state of a model under a preset, with an FP4 recipe's choice of the layers that
// compute in FP4. Private to src/train.
#pragma once

#include <cstdint>
#include <memory>

#include "mixp/amp/presets.h"
#include "mixp/nn/module.h"

namespace mixp::train {

/// The preset's FP8/FP4 state for `module` (null when the preset has neither). Under an FP4
/// recipe: the module's nn::Linear layers in named_modules() order, of which the last
/// ceil(bf16_tail x their count) stay in bf16, and `seed` for the Hadamard signs and the
/// stochastic rounding. mixp::Error when an FP4 recipe meets a model that is not an nn::Module.
std::unique_ptr<amp::Fp8State> make_low_precision_state(const amp::Preset& preset,
                                                        nn::Module* module, uint64_t seed);

}  // namespace mixp::train
