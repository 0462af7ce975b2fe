// mixp/nn/lstm.h — a multi-layer LSTM, as torch.nn.LSTM (unidirectional, no projection).
//
// Per layer k, with PyTorch's parameter names and gate order (i, f, g, o):
//   weight_ih_l{k} [4 H, in_k]  (in_0 = input_size, in_k = H above)
//   weight_hh_l{k} [4 H, H]
//   bias_ih_l{k}   [4 H], bias_hh_l{k} [4 H]   (if options.bias)
// and for each step t, from h_0 = c_0 = 0:
//   gates = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh;  i, f, g, o = the four quarters
//   c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g);  h_t = sigmoid(o) * tanh(c_t)
// Every parameter is initialized U(-1/sqrt(H), 1/sqrt(H)), as PyTorch's. Composed from ops
// (linear, narrow, sigmoid, tanh, mul, add, cat), so autograd differentiates it. Dropout
// between layers is not offered (the lstm model applies Dropout around the LSTM instead).
//
// Example:
//
//   mixp::nn::LSTMOptions o(128, 256);
//   o.num_layers = 2;
//   o.batch_first = true;
//   mixp::nn::LSTM lstm(o, rng);
//   mixp::Tensor y = lstm.forward(x);               // [B, T, 128] -> [B, T, 256], h_t per step
//
//   mixp::nn::LSTM::State state;                    // h_0 = c_0 = 0
//   mixp::Tensor h1 = lstm.step(x0, state);          // [B, 128] -> [B, 256]; state advances
//   mixp::Tensor h2 = lstm.step(x1, state);          // y's positions 0 and 1, one at a time
#pragma once

#include <vector>

#include "mixp/nn/module.h"

namespace mixp::nn {

struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size)
      : input_size(input_size), hidden_size(hidden_size) {}
  int64_t input_size;
  int64_t hidden_size;  ///< H
  int num_layers = 1;   ///< at least 1
  bool bias = true;
  bool batch_first = false;  ///< PyTorch's default: [T, B, C]; true: [B, T, C]
};

class LSTM : public UnaryModule {
 public:
  /// Draws the initial values from `rng`, which advances. There is no constructor without a
  /// generator: two layers built alike would start equal.
  LSTM(const LSTMOptions& options, Philox& rng);

  /// x [B, T, input_size] (batch_first) or [T, B, input_size] -> the last layer's h_t for
  /// every step, [B, T, H] or [T, B, H]; x's dtype, or the compute dtype under autocast.
  Tensor forward(const Tensor& x) override;
  void reset(Philox& rng);

  /// Every layer's (h, c) after the steps taken so far, [B, H] each; empty before the first
  /// step, which starts from zeros as forward() does.
  struct State {
    std::vector<Tensor> h, c;
  };
  /// One step: x_t [B, input_size] -> the last layer's h_t [B, H]; `state` advances. The same
  /// cell as forward()'s, so forward() of a sequence and step() on its positions in turn agree
  /// to within the rounding of the input projections' sums. Nothing is recorded for backward.
  Tensor step(const Tensor& x_t, State& state) const;

  const LSTMOptions& options() const { return options_; }

 protected:
  std::string type_name() const override { return "LSTM"; }
  std::string extra_repr() const override;

 private:
  struct Layer {
    Tensor* weight_ih;
    Tensor* weight_hh;
    Tensor* bias_ih;
    Tensor* bias_hh;
  };
  Tensor layer_forward(const Layer& layer, const Tensor& x) const;  // [B, T, in] -> [B, T, H]
  // One cell update from the input projection gx [B, 4H]: h and c advance.
  void cell(const Layer& layer, const Tensor& gx, Tensor& h, Tensor& c) const;

  LSTMOptions options_;
  std::vector<Layer> layers_;
  Tensor none_;
};

}  // namespace mixp::nn
