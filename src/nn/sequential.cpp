#include "mixp/nn/sequential.h"

#include "mixp/error.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"

namespace mixp::nn {

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
  MIXP_CHECK(module != nullptr, "Sequential: push_back of a null module");
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

// A BatchNorm2d followed by a ReLU runs as one op (ops::batch_norm_relu: the same results in
// fewer passes over the data).
Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto* norm = dynamic_cast<BatchNorm2d*>(layers_[i].get());
    if (norm != nullptr && i + 1 < layers_.size() && !layers_[i + 1]->has_hooks() &&
        dynamic_cast<ReLU*>(layers_[i + 1].get()) != nullptr) {
      y = norm->forward_relu(y);
      ++i;
    } else {
      y = layers_[i]->forward(y);
    }
  }
  return y;
}

}  // namespace mixp::nn
