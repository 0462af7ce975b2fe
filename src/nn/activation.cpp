#include "mixp/nn/activation.h"

#include "mixp/ops.h"

namespace mixp::nn {

Tensor ReLU::forward(const Tensor& x) { return ops::relu(x); }

Tensor GELU::forward(const Tensor& x) {
  return options_.approximate_tanh ? ops::gelu_tanh(x) : ops::gelu(x);
}

std::string GELU::extra_repr() const {
  return options_.approximate_tanh ? "approximate='tanh'" : "approximate='none'";
}

Tensor Tanh::forward(const Tensor& x) { return ops::tanh(x); }

}  // namespace mixp::nn
