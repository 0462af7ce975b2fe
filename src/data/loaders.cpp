// The loaders: shuffled, normalized image batches and random text windows, both resumable.
#include <array>
#include <numeric>

#include "mixp/data/dataset.h"
#include "mixp/error.h"

namespace mixp::data {
namespace {

// Two words make one 64-bit draw: the modulo bias of r % m is below m / 2^64.
uint64_t draw_u64(const PhiloxState& rng, uint64_t index) {
  return (uint64_t(philox_word(rng, 2 * index)) << 32) | philox_word(rng, 2 * index + 1);
}

// Words one epoch's shuffle of n samples takes: two per Fisher-Yates step.
uint64_t shuffle_words(int64_t n) { return n > 1 ? 2 * uint64_t(n - 1) : 0; }

}  // namespace

ImageLoader::ImageLoader(const ImageSet& set, const ImageLoaderOptions& options)
    : set_(set), options_(options) {
  MIXP_CHECK(set_.images.defined() && set_.images.dtype() == DType::u8 && set_.images.ndim() == 4,
             "ImageLoader: images must be u8 [N, C, H, W]");
  const int64_t n = set_.images.size(0);
  MIXP_CHECK(set_.labels.defined() && set_.labels.dtype() == DType::i64 &&
                 set_.labels.ndim() == 1 && set_.labels.size(0) == n,
             "ImageLoader: labels must be i64 [", n, "] to match ", set_.images.shape().to_string(),
             " images");
  MIXP_CHECK(n > 0, "ImageLoader: the image set is empty");
  MIXP_CHECK(options_.batch_size > 0, "ImageLoader: batch_size must be positive, got ",
             options_.batch_size);
  MIXP_CHECK(!options_.drop_last || options_.batch_size <= n, "ImageLoader: drop_last with ",
             "batch_size ", options_.batch_size, " over ", n, " samples leaves no batch");
  MIXP_CHECK(options_.std > 0.0, "ImageLoader: std must be positive, got ", options_.std);
  // Pixel -> value, computed once in f32 exactly as (pixel / 255 - mean) / std would be.
  const float mean = float(options_.mean), stddev = float(options_.std);
  for (int p = 0; p < 256; ++p) table_[size_t(p)] = (float(p) / 255.0f - mean) / stddev;
  state_.rng = PhiloxState{.seed = options_.seed, .stream = kImageShuffleStream};
  reshuffle();
}

int64_t ImageLoader::batches_per_epoch() const {
  const int64_t n = set_.images.size(0), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void ImageLoader::reshuffle() {
  const int64_t n = set_.images.size(0);
  order_.resize(size_t(n));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (!options_.shuffle) return;
  // Fisher-Yates from the last element down; step k uses draw k of this epoch's words.
  for (int64_t i = n - 1, k = 0; i > 0; --i, ++k) {
    const auto j = int64_t(draw_u64(state_.rng, uint64_t(k)) % uint64_t(i + 1));
    std::swap(order_[size_t(i)], order_[size_t(j)]);
  }
}

std::optional<Batch> ImageLoader::next() {
  const int64_t n = set_.images.size(0);
  const int64_t end = options_.drop_last ? batches_per_epoch() * options_.batch_size : n;
  if (state_.position >= end) {
    ++state_.epoch;
    state_.position = 0;
    if (options_.shuffle) state_.rng.offset += shuffle_words(n);
    reshuffle();
    return std::nullopt;
  }
  const int64_t b = std::min(options_.batch_size, end - state_.position);
  const int64_t c = set_.images.size(1), h = set_.images.size(2), w = set_.images.size(3);
  const int64_t pixels = c * h * w;
  Batch batch;
  batch.x = empty({b, c, h, w}, DType::f32, MemoryTag::data);
  batch.y = empty({b}, DType::i64, MemoryTag::data);
  const uint8_t* images = set_.images.data<uint8_t>();
  const int64_t* labels = set_.labels.data<int64_t>();
  float* x = batch.x.data<float>();
  int64_t* y = batch.y.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t sample = order_[size_t(state_.position + r)];
    const uint8_t* src = images + sample * pixels;
    float* dst = x + r * pixels;
    for (int64_t p = 0; p < pixels; ++p) dst[p] = table_[src[p]];
    y[r] = labels[sample];
  }
  state_.position += b;
  return batch;
}

void ImageLoader::set_state(const LoaderState& state) {
  const int64_t n = set_.images.size(0);
  MIXP_CHECK(state.epoch >= 0 && state.position >= 0 && state.position <= n,
             "ImageLoader::set_state: epoch ", state.epoch, " and position ", state.position,
             " do not fit a set of ", n, " samples");
  MIXP_CHECK(state.rng.stream == kImageShuffleStream, "ImageLoader::set_state: stream ",
             state.rng.stream, " is not the image loader's (", kImageShuffleStream, ")");
  state_ = state;
  reshuffle();
}

TextLoader::TextLoader(const Tensor& tokens, const TextLoaderOptions& options)
    : tokens_(tokens), options_(options) {
  MIXP_CHECK(tokens_.defined() && tokens_.dtype() == DType::i64 && tokens_.ndim() == 1,
             "TextLoader: tokens must be i64 [n]");
  MIXP_CHECK(options_.batch_size > 0 && options_.context > 0,
             "TextLoader: batch_size and context must be positive, got ", options_.batch_size,
             " and ", options_.context);
  MIXP_CHECK(tokens_.size(0) > options_.context, "TextLoader: ", tokens_.size(0),
             " tokens are too few for windows of context ", options_.context,
             " (at least context + 1 are needed)");
  state_.rng = PhiloxState{.seed = options_.seed, .stream = kTextWindowStream};
}

Batch TextLoader::next() {
  const int64_t b = options_.batch_size, t = options_.context;
  // Starts in [0, n - t - 1], as torch.randint(len(data) - block_size) in nanoGPT.
  const auto starts = uint64_t(tokens_.size(0) - t);
  Batch batch;
  batch.x = empty({b, t}, DType::i64, MemoryTag::data);
  batch.y = empty({b, t}, DType::i64, MemoryTag::data);
  const int64_t* tokens = tokens_.data<int64_t>();
  int64_t* x = batch.x.data<int64_t>();
  int64_t* y = batch.y.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const auto start = int64_t(draw_u64(state_.rng, uint64_t(r)) % starts);
    std::copy(tokens + start, tokens + start + t, x + r * t);
    std::copy(tokens + start + 1, tokens + start + 1 + t, y + r * t);
  }
  state_.rng.offset += 2 * uint64_t(b);
  state_.position += b;
  return batch;
}

void TextLoader::set_state(const LoaderState& state) {
  MIXP_CHECK(state.rng.stream == kTextWindowStream, "TextLoader::set_state: stream ",
             state.rng.stream, " is not the text loader's (", kTextWindowStream, ")");
  state_ = state;
}

}  // namespace mixp::data
