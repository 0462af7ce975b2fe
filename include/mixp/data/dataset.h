// mixp/data/dataset.h — the data sets mixp trains on, and the loader that batches them.
//
// Two kinds: image classification from IDX files (MNIST, Fashion-MNIST: plain or .gz), and
// character-level text from any file. A loader yields batches in an order shuffled with a
// seed (Philox); its position is state that a checkpoint saves, so a resumed run sees the same
// batches.
//
// Example:
//
//   auto data = mixp::data::load_idx_classification("/usr/share/datasets/fashion-mnist");
//   mixp::data::ImageLoader loader(data.train, {.batch_size = 64, .seed = 0});
//   while (auto batch = loader.next()) {          // one epoch
//     // batch->x: f32 [64, 1, 28, 28], normalized; batch->y: i64 [64]
//   }
//
//   auto text = mixp::data::load_char_text("kjv.txt", {.validation_fraction = 0.1});
//   mixp::data::TextLoader lm(text.train_tokens, {.batch_size = 16, .context = 256, .seed = 0});
//   auto b = lm.next();                           // x, y: i64 [16, 256], y is x shifted by one
//   mixp::data::for_each_text_window(text.validation_tokens, 256, 16, [](const auto& batch) {
//     // every window of the validation split, in order
//   });
//
// Bad data gets mixp::Error naming the file and the problem: a missing file, a wrong magic
// number, a truncated file, a label out of range, an empty text.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mixp/random.h"
#include "mixp/tensor.h"

namespace mixp::data {

/// Images [N, 1, H, W] as u8 and labels [N] as i64, as read from IDX files.
struct ImageSet {
  Tensor images;  ///< u8 [N, 1, H, W]
  Tensor labels;  ///< i64 [N], each in [0, classes)
  int64_t classes = 0;
};

struct ImageClassification {
  ImageSet train, test;
  std::string directory;
};

/// Reads train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
/// t10k-labels-idx1-ubyte (each plain or with .gz) from `directory`. `classes` labels are
/// allowed (labels >= classes are an error).
ImageClassification load_idx_classification(const std::string& directory, int64_t classes = 10);

/// One IDX file: its dimensions and its u8 data (only the unsigned-byte type, 0x08).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
IdxArray read_idx(const std::string& path);

/// Character-level text: a vocabulary from the training split, and the splits as tokens. A
/// vocabulary of bytes has at most 256 tokens, so a token takes one byte (u8): the KJV's 4.3 MB
/// take 4.3 MB, not the 35 MB of 8-byte ids. The loaders widen a batch's tokens to i64.
struct CharText {
  std::string vocabulary;    ///< distinct bytes, sorted as unsigned; token i is vocabulary[i]
  Tensor train_tokens;       ///< u8 [n_train]
  Tensor validation_tokens;  ///< u8 [n_val]; characters unseen in training are an error
  std::string path;
};

struct CharTextOptions {
  /// The last fraction of the file, by position, in [0, 1): the first floor(n * (1 - f)) bytes
  /// train (nanoGPT's split). With f > 0 both splits must be non-empty.
  double validation_fraction = 0.1;
};
CharText load_char_text(const std::string& path, const CharTextOptions& options = {});

/// The whole file at `path` as u8 tokens of `vocabulary` (token i is vocabulary[i]), for text a
/// trained model reads; a byte outside the vocabulary is a mixp::Error naming it and its
/// position.
Tensor tokenize_text(const std::string& path, const std::string& vocabulary);


struct Batch {
  Tensor x;  ///< images: f32 [B, 1, H, W]; text: i64 [B, T]
  Tensor y;  ///< labels i64 [B]; text: i64 [B, T], the next characters
};

/// Every window of `tokens` (u8 or i64 [n], n >= 2) in order, `batch_size` windows a batch:
/// window w has x = tokens[w T, w T + T) and y = tokens[w T + 1, w T + T + 1) for T = context, so
/// that every token after the first is predicted exactly once, from the tokens before it in its
/// window. When n - 1 is not a multiple of T the last window is shorter, in a batch of its own.
/// x and y are i64 [B, T].
void for_each_text_window(const Tensor& tokens, int64_t context, int64_t batch_size,
                          const std::function<void(const Batch&)>& visit);

/// The Philox streams of the loaders (seed = the loader's seed).
inline constexpr uint64_t kImageShuffleStream = 0x1d0a;
inline constexpr uint64_t kTextWindowStream = 0x7e47;

/// The position of a loader in its data: all a checkpoint needs to resume it.
///
/// ImageLoader: `rng` is where the current epoch's shuffle draws its words, {seed,
/// kImageShuffleStream, epoch * 2 * (N - 1)}: Fisher-Yates takes two words (one 64-bit draw) per
/// step, so epoch e's order is a function of (seed, e) alone. `position` counts the samples of
/// this epoch already served.
/// TextLoader: `rng` is {seed, kTextWindowStream, 2 * windows drawn}; `position` counts the
/// windows drawn and `epoch` stays 0 (windows are drawn with replacement).
struct LoaderState {
  PhiloxState rng;       ///< the generator
  int64_t epoch = 0;     ///< epochs completed
  int64_t position = 0;  ///< samples already served in this epoch

  friend bool operator==(const LoaderState&, const LoaderState&) = default;
};

struct ImageLoaderOptions {
  int64_t batch_size = 64;
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  double mean = 0.0;  ///< normalization: x = (pixel / 255 - mean) / std
  double std = 1.0;
};

/// Batches of an ImageSet, in an order reshuffled every epoch (or in file order without shuffle).
/// The last batch of an epoch is smaller unless drop_last. Holds handles to the set's tensors,
/// so the set may be a temporary.
class ImageLoader {
 public:
  ImageLoader(const ImageSet& set, const ImageLoaderOptions& options);
  /// The next batch of this epoch, or nothing at the end of it (then the next call starts the
  /// next epoch, reshuffled).
  std::optional<Batch> next();
  int64_t batches_per_epoch() const;
  const LoaderState& state() const { return state_; }
  /// Resumes at a state saved from a loader over the same set and options: the batches that
  /// follow are those the saved loader would have served.
  void set_state(const LoaderState& state);

 private:
  void reshuffle();
  ImageSet set_;
  ImageLoaderOptions options_;
  LoaderState state_;
  std::vector<int64_t> order_;
  std::array<float, 256> table_{};  ///< normalized value of each pixel byte
};

struct TextLoaderOptions {
  int64_t batch_size = 16;
  int64_t context = 256;
  uint64_t seed = 0;
};

/// Random windows of context + 1 tokens (nanoGPT's get_batch), from the Philox generator, out
/// of u8 or i64 tokens.
class TextLoader {
 public:
  TextLoader(const Tensor& tokens, const TextLoaderOptions& options);
  /// batch_size windows starting at uniform positions in [0, n - context - 1].
  Batch next();
  const LoaderState& state() const { return state_; }
  void set_state(const LoaderState& state);

 private:
  Tensor tokens_;
  TextLoaderOptions options_;
  LoaderState state_;
};

/// The regression of the deep-mlp model (mixp/nn/models.h), after the loss-scaling finding of
/// Micikevicius et al. 2018: inputs x ~ N(0, 1) [n, 16] and targets 1e-4 * tanh(x T^T) [n, 8]
/// for a teacher T ~ N(0, 0.25^2) [8, 16], all f32. The targets are so small that the gradient
/// of their mean squared error, 2 (y - t) / (8 n), is about 1e-8 for n = 4096: below fp16's
/// smallest subnormal, 2^-24. Drawn from Philox (seed, kRegressionStream): the teacher, then
/// the training inputs, then the test inputs, so the training set does not depend on n_test.
struct Regression {
  Tensor train_x, train_y;  ///< f32 [n_train, 16], [n_train, 8]
  Tensor test_x, test_y;    ///< f32 [n_test, 16], [n_test, 8]
};
inline constexpr uint64_t kRegressionStream = 0x7e5;
Regression make_tiny_gradient_regression(uint64_t seed, int64_t n_train = 4096,
                                         int64_t n_test = 1024);

}  // namespace mixp::data
