// mixp/nn/models.h — the built-in models of `mixp train`.
//
//   mlp   784-1024-1024-10 perceptron with ReLU, for 28x28 images
//   cnn   two blocks of conv 3x3, BatchNorm, ReLU and 2x2 max pooling (32 and 64 channels),
//         then fc 128, ReLU and fc 10
//   lstm  a character language model: embedding, a multi-layer LSTM, a linear head
//   gpt   a character language model in nanoGPT's shape (pre-norm transformer blocks, GPT-2
//         init, tied embeddings); the default is shakespeare-char's: 6 layers, 6 heads, 384
//         wide, context 256
//
// Example:
//
//   mixp::nn::ModelConfig config{.name = "gpt", .vocab = 65, .layers = 4, .heads = 4,
//                                .width = 128, .context = 128};
//   std::unique_ptr<mixp::nn::Model> model = mixp::nn::make_model(config, /*seed=*/0);
//   mixp::Tensor logits = model->forward(tokens);       // [B, T, vocab]
#pragma once

#include <memory>
#include <string>

#include "mixp/nn/module.h"

namespace mixp::nn {

enum class Task { classification, language_model };

struct ModelConfig {
  std::string name = "cnn";  ///< mlp, cnn, lstm or gpt
  int64_t classes = 10;      ///< classifiers
  int64_t image_size = 28;   ///< classifiers: square single-channel images
  int64_t vocab = 65;        ///< language models
  int layers = 6;            ///< gpt blocks, lstm layers
  int heads = 6;             ///< gpt
  int64_t width = 384;       ///< gpt embedding width, lstm hidden size
  int64_t context = 256;     ///< language models: the longest sequence
  double dropout = 0.0;
};

class Model : public Module {
 public:
  /// Classifiers: x f32 [N, 1, H, W] -> logits [N, classes]. Language models: tokens i64
  /// [B, T] -> logits [B, T, vocab].
  virtual Tensor forward(const Tensor& x) = 0;
  virtual Task task() const = 0;
};

/// The model named by config.name, initialized from `seed` (PyTorch's default initialization
/// for mlp, cnn and lstm; GPT-2's for gpt). Throws mixp::Error for an unknown name or a bad shape.
std::unique_ptr<Model> make_model(const ModelConfig& config, uint64_t seed);

}  // namespace mixp::nn
