#include "mixp/nn/lstm.h"

#include <cmath>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

LSTM::LSTM(const LSTMOptions& options, Philox& rng) : options_(options) {
  const int64_t h = options.hidden_size;
  MIXP_CHECK(options.input_size >= 1 && h >= 1 && options.num_layers >= 1,
             "LSTM: input_size, hidden_size and num_layers must be at least 1, got ",
             options.input_size, ", ", h, " and ", options.num_layers);
  for (int k = 0; k < options.num_layers; ++k) {
    const int64_t in = k == 0 ? options.input_size : h;
    const std::string l = "_l" + std::to_string(k);
    Layer layer{};
    layer.weight_ih =
        &register_parameter("weight_ih" + l, zeros({4 * h, in}, DType::f32, MemoryTag::parameter));
    layer.weight_hh =
        &register_parameter("weight_hh" + l, zeros({4 * h, h}, DType::f32, MemoryTag::parameter));
    if (options.bias) {
      layer.bias_ih =
          &register_parameter("bias_ih" + l, zeros({4 * h}, DType::f32, MemoryTag::parameter));
      layer.bias_hh =
          &register_parameter("bias_hh" + l, zeros({4 * h}, DType::f32, MemoryTag::parameter));
    } else {
      layer.bias_ih = layer.bias_hh = &none_;
    }
    layers_.push_back(layer);
  }
  reset(rng);
}

void LSTM::reset(Philox& rng) {
  // PyTorch: every parameter U(-1/sqrt(H), 1/sqrt(H)), in named_parameters() order.
  const double bound = 1.0 / std::sqrt(double(options_.hidden_size));
  for (auto& [name, p] : named_parameters()) p->copy_(uniform(p->shape(), rng, -bound, bound));
}

void LSTM::cell(const Layer& layer, const Tensor& gx, Tensor& h_t, Tensor& c_t) const {
  const int64_t h = options_.hidden_size;
  const Tensor gates = ops::add(gx, ops::linear(h_t, *layer.weight_hh, *layer.bias_hh));
  const Tensor i = ops::sigmoid(ops::narrow(gates, 1, 0, h));
  const Tensor f = ops::sigmoid(ops::narrow(gates, 1, h, h));
  const Tensor g = ops::tanh(ops::narrow(gates, 1, 2 * h, h));
  const Tensor o = ops::sigmoid(ops::narrow(gates, 1, 3 * h, h));
  c_t = ops::add(ops::mul(f, c_t), ops::mul(i, g));
  h_t = ops::mul(o, ops::tanh(c_t));
}

Tensor LSTM::layer_forward(const Layer& layer, const Tensor& x) const {
  const int64_t b = x.size(0), t_len = x.size(1), h = options_.hidden_size;
  // The input projections of all steps at once: [B, T, 4H].
  const Tensor gates_x = ops::linear(x, *layer.weight_ih, *layer.bias_ih);
  Tensor h_t, c_t;
  std::vector<Tensor> outputs;
  outputs.reserve(size_t(t_len));
  for (int64_t t = 0; t < t_len; ++t) {
    const Tensor gx = ops::narrow(gates_x, 1, t, 1).reshape({b, 4 * h});
    if (!h_t.defined()) {
      h_t = zeros({b, h}, gx.dtype());
      c_t = zeros({b, h}, gx.dtype());
    }
    cell(layer, gx, h_t, c_t);
    outputs.push_back(h_t.reshape({b, 1, h}));
  }
  return ops::cat(outputs, 1);
}

Tensor LSTM::step(const Tensor& x_t, State& state) const {
  MIXP_CHECK(
      x_t.defined() && x_t.ndim() == 2 && x_t.size(1) == options_.input_size && x_t.size(0) >= 1,
      "LSTM step: expected an input [B, ", options_.input_size, "], got ",
      x_t.defined() ? x_t.shape().to_string() : "an undefined tensor");
  const size_t layers = layers_.size();
  MIXP_CHECK(state.h.empty() || (state.h.size() == layers && state.c.size() == layers &&
                                 state.h[0].size(0) == x_t.size(0)),
             "LSTM step: the state holds ", state.h.size(), " layers of batch ",
             state.h.empty() ? 0 : state.h[0].size(0), ", expected ", layers, " of batch ",
             x_t.size(0));
  NoGradGuard no_grad;
  Tensor y = x_t;
  for (size_t k = 0; k < layers; ++k) {
    const Tensor gx = ops::linear(y, *layers_[k].weight_ih, *layers_[k].bias_ih);
    if (state.h.size() < layers) {
      state.h.push_back(zeros({x_t.size(0), options_.hidden_size}, gx.dtype()));
      state.c.push_back(zeros({x_t.size(0), options_.hidden_size}, gx.dtype()));
    }
    cell(layers_[k], gx, state.h[k], state.c[k]);
    y = state.h[k];
  }
  return y;
}

Tensor LSTM::forward(const Tensor& x) {
  MIXP_CHECK(x.defined() && x.ndim() == 3 && x.size(2) == options_.input_size && x.size(0) >= 1 &&
                 x.size(1) >= 1,
             "LSTM: expected an input ", options_.batch_first ? "[B, T, " : "[T, B, ",
             options_.input_size, "], got ",
             x.defined() ? x.shape().to_string() : "an undefined tensor");
  Tensor y = options_.batch_first ? x : ops::permute(x, {1, 0, 2});
  for (const Layer& layer : layers_) y = layer_forward(layer, y);
  return run_forward_hooks(options_.batch_first ? y : ops::permute(y, {1, 0, 2}));
}

std::string LSTM::extra_repr() const {
  std::string s = detail::concat(options_.input_size, ", ", options_.hidden_size);
  if (options_.num_layers != 1) s += detail::concat(", num_layers=", options_.num_layers);
  if (!options_.bias) s += ", bias=False";
  if (options_.batch_first) s += ", batch_first=True";
  return s;
}

}  // namespace mixp::nn
