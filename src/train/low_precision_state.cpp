#include "train/low_precision_state.h"

#include <cmath>
#include <string>
#include <vector>

#include "mixp/amp/adaptive.h"
#include "mixp/error.h"
#include "mixp/nn/linear.h"

namespace mixp::train {

std::unique_ptr<amp::Fp8State> make_low_precision_state(const amp::Preset& preset,
                                                        nn::Module* module, uint64_t seed) {
  std::unique_ptr<amp::Fp8State> state = preset.make_fp8_state();
  if (!state || !state->recipe().fp4) return state;
  MIXP_CHECK(module != nullptr, "preset ", preset.name,
             " computes the model's Linear layers in FP4, and this model is not made of mixp "
             "modules whose Linear layers it could find");
  std::vector<amp::Fp8State::Fp4Layer> layers;
  for (auto& [name, m] : module->named_modules()) {
    if (auto* linear = dynamic_cast<nn::Linear*>(m))
      layers.push_back({.name = name, .weight = linear->weight().impl(), .fp4 = true});
  }
  // The last layers, nearest the loss, are the most sensitive to FP4 (arXiv 2509.25149).
  const double tail = state->recipe().fp4->bf16_tail;
  // (A hair below the product, so that 0.15 x 20 layers keeps 3, not 4.)
  const size_t kept = size_t(std::ceil(tail * double(layers.size()) - 1e-9));
  for (size_t i = layers.size() - std::min(kept, layers.size()); i < layers.size(); ++i)
    layers[i].fp4 = false;
  if (state->recipe().adaptive) {
    std::vector<std::string> names;
    std::vector<bool> eligible;
    for (const auto& l : layers) {
      names.push_back(l.name);
      eligible.push_back(l.fp4);
    }
    state->set_extension(std::make_unique<amp::AdaptivePrecision>(
        amp::AdaptiveRecipe{.lowest = state->recipe().adaptive_from_fp8 ? amp::LayerFormat::fp8
                                                                        : amp::LayerFormat::fp4},
        *state->recipe().fp4, std::move(names), std::move(eligible)));
  }
  state->set_fp4_layers(std::move(layers));
  state->set_seed(seed);
  return state;
}

}  // namespace mixp::train
