#include "mixp/nn/sequential.h"

#include "mixp/error.h"

namespace mixp::nn {

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  MIXP_CHECK(module != nullptr, "Sequential: push_back of a null module");
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y);
  return y;
}

}  // namespace mixp::nn
