// mixp/nn/models.h — the built-in models of `mixp train`.
//
//   mlp   784-1024-1024-10 perceptron with ReLU, for 28x28 images
//   cnn   two blocks of conv 3x3, BatchNorm, ReLU and 2x2 max pooling (32 and 64 channels),
//         then fc 128, ReLU and fc 10
//   lstm  a character language model: embedding, a multi-layer LSTM, a linear head
//   gpt   a character language model in nanoGPT's shape (pre-norm transformer blocks, GPT-2
//         init, tied embeddings); the default is shakespeare-char's: 6 layers, 6 heads, 384
//         wide, context 256
//   deep-mlp  the narrow tanh perceptron of Micikevicius et al.'s underflow finding, on the
//         regression of data::make_tiny_gradient_regression: 16 inputs, `layers` hidden tanh
//         layers of `width` (the CLI's default: 2 of 64), 8 outputs, no biases; hidden weights
//         N(0, 1 / fan_in), output weights N(0, 1e-5^2). Its gradients are so small that fp16
//         flushes more than 99% of them to zero without loss scaling (tests/amp/paper_test.cpp,
//         `mixp inspect --model deep-mlp --precision amp-fp16`).
//
// Example:
//
//   mixp::nn::ModelConfig config{.name = "gpt", .vocab = 65, .layers = 4, .heads = 4,
//                                .width = 128, .context = 128};
//   std::unique_ptr<mixp::nn::Model> model = mixp::nn::make_model(config, /*seed=*/0);
//   mixp::Tensor logits = model->forward(tokens);       // [B, T, vocab]
//
// Parameter names (as the equivalent PyTorch module's state_dict; shapes PyTorch's layouts):
//   mlp   fc1.{weight,bias}, fc2.{weight,bias}, fc3.{weight,bias}
//   cnn   features = Sequential(conv, bn, relu, pool, conv, bn, relu, pool), classifier =
//         Sequential(fc, relu, fc): features.0.{weight,bias}, features.1.{weight,bias},
//         features.4.{weight,bias}, features.5.{weight,bias}, classifier.0.{weight,bias},
//         classifier.2.{weight,bias}; buffers features.{1,5}.{running_mean,running_var,
//         num_batches_tracked}
//   lstm  embedding.weight, lstm.{weight_ih,weight_hh,bias_ih,bias_hh}_l{k}, head.{weight,bias}
//   deep-mlp  fc1.weight, ..., fc{layers + 1}.weight (the last is the output layer)
//   gpt   nanoGPT's: transformer.wte.weight, transformer.wpe.weight,
//         transformer.h.{i}.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}.{weight,bias},
//         transformer.ln_f.{weight,bias}. lm_head is tied to transformer.wte.weight and, as in
//         nanoGPT's named_parameters(), not listed again.
// Initial values come from Philox stream 0 of the seed, dropout masks from stream 1
// (Model::generator()).
//
// Incremental decoding (Model::make_decoder, language models): a TokenDecoder reads a sequence
// a few positions at a time and keeps what the model needs of the past, so that the next
// token's logits cost one position: the gpt keeps each block's keys and values (a KVCache,
// mixp/nn/transformer.h), at most `context` positions, since its position embeddings are
// learned for positions 0 ... context - 1; the lstm keeps each layer's (h, c) and has no limit.
// A decoder applies no dropout and records nothing for backward. Its logits equal forward()'s
// at the same positions to within rounding (the order of some sums differs).
//
//   std::unique_ptr<mixp::nn::TokenDecoder> decoder = model->make_decoder();
//   mixp::Tensor a = decoder->read(prompt);   // i64 [T] -> logits [T, vocab]
//   mixp::Tensor b = decoder->read(next);     // i64 [1]: position T, from the cache
#pragma once

#include <memory>
#include <string>

#include "mixp/nn/module.h"

namespace mixp::nn {

enum class Task { classification, language_model, regression };

/// deep-mlp's inputs and outputs (those of data::make_tiny_gradient_regression).
inline constexpr int64_t kDeepMlpInputs = 16;
inline constexpr int64_t kDeepMlpOutputs = 8;

struct ModelConfig {
  std::string name = "cnn";  ///< mlp, cnn, lstm, gpt or deep-mlp
  int64_t classes = 10;      ///< classifiers
  int64_t image_size = 28;   ///< classifiers: square single-channel images
  int64_t vocab = 65;        ///< language models
  int layers = 6;            ///< gpt blocks, lstm layers, deep-mlp hidden layers
  int heads = 6;             ///< gpt
  int64_t width = 384;       ///< gpt embedding width, lstm hidden size, deep-mlp hidden width
  int64_t context = 256;     ///< language models: the longest sequence
  /// gpt: after the embeddings and on both residual branches (nanoGPT's drop, resid_dropout and
  /// mlp dropout); lstm: on the embeddings and on the LSTM's output. In [0, 1).
  double dropout = 0.0;
};

/// A language model reading one sequence incrementally (see the top of this file).
class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  /// Reads tokens i64 [T] (T >= 1) after those read since the last reset(); returns their
  /// logits [T, vocab] in the dtype forward() would give. Throws mixp::Error for a token out of
  /// the vocabulary, and when length() + T would exceed capacity().
  virtual Tensor read(const Tensor& tokens) = 0;
  /// Forgets the sequence: the next read() starts at position 0.
  virtual void reset() = 0;
  /// The positions read since the last reset().
  virtual int64_t length() const = 0;
  /// The most positions it can hold: the gpt's context; INT64_MAX for the lstm.
  virtual int64_t capacity() const = 0;
};

class Model : public UnaryModule {
 public:
  /// Classifiers: x f32 [N, 1, H, W] -> logits [N, classes]. Language models: tokens i64
  /// [B, T] -> logits [B, T, vocab]. deep-mlp: x f32 [N, 16] -> [N, 8].
  Tensor forward(const Tensor& x) override = 0;
  virtual Task task() const = 0;
  virtual const ModelConfig& config() const = 0;

  /// The generator of the model's dropout masks: Philox stream 1 of the model's seed (initial
  /// values come from stream 0). It advances with every mask, so its state belongs in a
  /// checkpoint; set_state() restores it.
  Philox& generator() { return *generator_; }

  /// Language models: a decoder over this model's parameters as they are at each read() (it
  /// refers to the model, which must outlive it). Other models throw mixp::Error.
  virtual std::unique_ptr<TokenDecoder> make_decoder();

 protected:
  std::shared_ptr<Philox> generator_ = std::make_shared<Philox>();
};

/// The model named by config.name, initialized from `seed` (PyTorch's default initialization
/// for mlp, cnn and lstm; GPT-2's for gpt). Throws mixp::Error for an unknown name or a bad shape.
std::unique_ptr<Model> make_model(const ModelConfig& config, uint64_t seed);

}  // namespace mixp::nn
